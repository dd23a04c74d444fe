package api

import (
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"switchyard/track"
)

// totals are the process-wide byte counts /connections and /traffic
// report. The tracker forgets a flow when it closes, so the API keeps each
// open flow's last seen counts and, when a flow is gone, adds them to
// closed. A flow's bytes after the last look before its close (at most a
// second's, the sampler's period) are not counted.
type totals struct {
	mu               sync.Mutex // guards everything below
	last             map[uint64]flowBytes
	closedUp, closed int64 // closedUp, closed (down): bytes of flows gone
}

type flowBytes struct{ up, down int64 }

// account looks at the flows now, folds the gone ones into the closed
// totals, and returns the flows and the totals.
func (s *Server) account() (flows []track.Snapshot, up, down int64) {
	flows = s.b.Tracker().Flows()
	t := &s.totals
	t.mu.Lock()
	defer t.mu.Unlock()
	live := make(map[uint64]flowBytes, len(flows))
	for _, f := range flows {
		live[f.ID] = flowBytes{f.Up, f.Down}
		up += f.Up
		down += f.Down
	}
	for id, b := range t.last {
		if _, ok := live[id]; !ok {
			t.closedUp += b.up
			t.closed += b.down
		}
	}
	t.last = live
	return flows, up + t.closedUp, down + t.closed
}

// kill ends flow id and counts its bytes up to the kill: its counts are
// noted as its last seen ones, which the next look folds into the closed
// totals once the flow is gone.
func (s *Server) kill(id uint64) bool {
	tr := s.b.Tracker()
	snap, ok := tr.Lookup(id)
	if !ok {
		return false
	}
	t := &s.totals
	t.mu.Lock()
	t.last[id] = flowBytes{snap.Up, snap.Down}
	t.mu.Unlock()
	return tr.Kill(id)
}

type connMeta struct {
	Network           string `json:"network"`
	Type              string `json:"type"`
	SourceIP          string `json:"sourceIP"`
	DestinationIP     string `json:"destinationIP"`
	SourcePort        string `json:"sourcePort"`
	DestinationPort   string `json:"destinationPort"`
	InboundIP         string `json:"inboundIP"`
	InboundPort       string `json:"inboundPort"`
	InboundName       string `json:"inboundName"`
	InboundUser       string `json:"inboundUser"`
	Host              string `json:"host"`
	DNSMode           string `json:"dnsMode"`
	UID               uint32 `json:"uid"`
	Process           string `json:"process"`
	ProcessPath       string `json:"processPath"`
	SpecialProxy      string `json:"specialProxy"`
	SpecialRules      string `json:"specialRules"`
	RemoteDestination string `json:"remoteDestination"`
	DSCP              uint8  `json:"dscp"`
	SniffHost         string `json:"sniffHost"`
}

type conn struct {
	ID          string    `json:"id"`
	Metadata    connMeta  `json:"metadata"`
	Upload      int64     `json:"upload"`
	Download    int64     `json:"download"`
	Start       time.Time `json:"start"`
	Chains      []string  `json:"chains"`
	Rule        string    `json:"rule"`
	RulePayload string    `json:"rulePayload"`
}

type connsSnapshot struct {
	DownloadTotal int64  `json:"downloadTotal"`
	UploadTotal   int64  `json:"uploadTotal"`
	Connections   []conn `json:"connections"`
	Memory        uint64 `json:"memory"`
}

var inboundTypes = map[string]string{"socks": "Socks5", "http": "HTTP", "mixed": "Mixed"}

func (s *Server) snapshot() connsSnapshot {
	flows, up, down := s.account()
	types := map[string]string{}
	for _, in := range s.spec.Load().Inbounds {
		types[in.Tag] = inboundTypes[in.Type]
	}
	out := connsSnapshot{UploadTotal: up, DownloadTotal: down, Connections: make([]conn, 0, len(flows)), Memory: memInUse()}
	for _, f := range flows {
		c := conn{ID: strconv.FormatUint(f.ID, 10), Upload: f.Up, Download: f.Down, Start: f.Start.UTC(), Rule: f.Rule}
		c.Chains = slices.Clone(f.Chain)
		if len(c.Chains) == 0 {
			c.Chains = []string{outboundTag(f.Outbound)}
		}
		slices.Reverse(c.Chains) // leaf first, as Clash lists them
		m := &c.Metadata
		m.Network = f.Network.String()
		m.Type = types[f.Inbound]
		switch {
		case f.Inbound == "":
			m.Type = "Inner"
		case m.Type == "":
			m.Type = f.Inbound
		}
		if f.Source.IsValid() {
			m.SourceIP = f.Source.Addr().Unmap().String()
			m.SourcePort = strconv.Itoa(int(f.Source.Port()))
		}
		if f.Destination.IP.IsValid() {
			m.DestinationIP = f.Destination.IP.Unmap().String()
		}
		m.DestinationPort = strconv.Itoa(int(f.Destination.Port))
		m.Host = f.Destination.Name
		if m.Host == "" {
			m.Host = f.Sniffed
		}
		m.SniffHost = f.Sniffed
		m.InboundName = f.Inbound
		m.InboundUser = f.User
		m.DNSMode = "normal"
		out.Connections = append(out.Connections, c)
	}
	return out
}

// outboundTag strips the version from "tag@v3".
func outboundTag(v string) string {
	if i := strings.LastIndex(v, "@v"); i > 0 {
		return v[:i]
	}
	return v
}

func memInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// connections is GET /connections: one snapshot, or as a WebSocket one
// every ?interval= ms (default 1000).
func (s *Server) connections(w http.ResponseWriter, r *http.Request) {
	if !isUpgrade(r) {
		writeJSON(w, http.StatusOK, s.snapshot())
		return
	}
	every := time.Second
	if v := r.URL.Query().Get("interval"); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil || ms == 0 {
			writeError(w, http.StatusBadRequest, errBadRequest)
			return
		}
		every = max(time.Duration(ms)*time.Millisecond, 100*time.Millisecond)
	}
	s.serveWS(w, r, every, func() any { return s.snapshot() })
}

func (s *Server) closeAll(w http.ResponseWriter, _ *http.Request) {
	for _, f := range s.b.Tracker().Flows() {
		s.kill(f.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) closeOne(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil || !s.kill(id) {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
