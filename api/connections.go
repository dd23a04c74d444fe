package api

import (
	"encoding/json"
	"io"
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

// GET /connections lists every open flow in Clash's shape. With thousands
// of flows it is the API's heaviest answer, so it is written without
// reflection per flow: each flow's fixed part (id, metadata, start,
// chains, rule) is rendered to JSON once, the first time any reader lists
// it, and kept with the flow in the tracker (track.Entry.SetMemo); a
// listing then copies those bytes and appends the two counters, streaming
// through a pooled buffer. What is kept is about 500 bytes a flow, and goes
// with the flow. Totals come from the tracker, which sums the
// bytes of every flow it closed, so they survive the flows they came from
// to the last byte.

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

// connFixed is a connection entry without its counters, which a listing
// appends after it ("upload", "download").
type connFixed struct {
	ID          string    `json:"id"`
	Metadata    connMeta  `json:"metadata"`
	Start       time.Time `json:"start"`
	Chains      []string  `json:"chains"`
	Rule        string    `json:"rule"`
	RulePayload string    `json:"rulePayload"`
}

// rendered is a flow's fixed part as JSON, kept with the flow.
type rendered struct {
	head []byte // `{"id":"7","metadata":{…},…,"rulePayload":""`: an object lacking its counters and its brace
	id   []byte // `"7"`
}

var inboundTypes = map[string]string{"socks": "Socks5", "http": "HTTP", "mixed": "Mixed", "tun": "Tun"}

// fixed describes a flow in Clash's words.
func (s *Server) fixed(e track.Entry) connFixed {
	f := e.Meta()
	c := connFixed{ID: strconv.FormatUint(e.ID(), 10), Start: e.Start().UTC(), Rule: f.Rule}
	c.Chains = slices.Clone(f.Chain)
	if len(c.Chains) == 0 {
		c.Chains = []string{outboundTag(f.Outbound)}
	}
	slices.Reverse(c.Chains) // leaf first, as Clash lists them
	m := &c.Metadata
	m.Network = f.Network.String()
	switch {
	case f.Inbound == "":
		m.Type = "Inner"
	default:
		m.Type = f.Inbound
		for _, in := range s.spec.Load().Inbounds {
			if in.Tag == f.Inbound && inboundTypes[in.Type] != "" {
				m.Type = inboundTypes[in.Type]
				break
			}
		}
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
	return c
}

// render is e's fixed part as JSON: the one kept with the flow, or made
// now and kept.
func (s *Server) render(e track.Entry) *rendered {
	if r, ok := e.Memo().(*rendered); ok {
		return r
	}
	c := s.fixed(e)
	b, err := json.Marshal(c)
	if err != nil || len(b) < 2 {
		b = []byte(`{"id":` + strconv.Quote(c.ID) + `}`) // unreachable: every field marshals
	}
	r := &rendered{head: b[:len(b)-1], id: strconv.AppendQuote(nil, c.ID)}
	e.SetMemo(r)
	return r
}

// appendConn appends e's Clash entry with its counters.
func (s *Server) appendConn(b []byte, e track.Entry, up, down int64) []byte {
	b = append(b, s.render(e).head...)
	return appendCounts(b, up, down)
}

// appendCounts closes an entry with `,"upload":up,"download":down}`.
func appendCounts(b []byte, up, down int64) []byte {
	b = append(b, `,"upload":`...)
	b = strconv.AppendInt(b, up, 10)
	b = append(b, `,"download":`...)
	b = strconv.AppendInt(b, down, 10)
	return append(b, '}')
}

// chunk is how much a listing gathers before it writes: big enough that
// writes are few, small enough that a listing of any size holds little.
const chunk = 32 << 10

// scratch is a listing's working memory, pooled: the tracker's entries
// and the output gathered before a write.
type scratch struct {
	entries []track.Entry
	out     []byte
	err     error
	w       io.Writer
}

var scratches = sync.Pool{New: func() any { return &scratch{out: make([]byte, 0, 2*chunk)} }}

func getScratch(w io.Writer) *scratch {
	sc := scratches.Get().(*scratch)
	sc.w, sc.err, sc.out = w, nil, sc.out[:0]
	return sc
}

// put returns sc to the pool, unless it grew past what is worth keeping.
func (sc *scratch) put() {
	sc.w = nil
	clear(sc.entries)
	if cap(sc.out) <= 4*chunk {
		scratches.Put(sc)
	}
}

// spill writes the gathered output once it reaches a chunk.
func (sc *scratch) spill() {
	if len(sc.out) >= chunk {
		sc.flush()
	}
}

func (sc *scratch) flush() {
	if sc.err == nil && len(sc.out) > 0 {
		_, sc.err = sc.w.Write(sc.out)
	}
	sc.out = sc.out[:0]
}

// writeSnapshot writes the Clash /connections object: every open flow,
// the byte totals and the memory in use.
func (s *Server) writeSnapshot(w io.Writer) error {
	sc := getScratch(w)
	defer sc.put()
	tb := s.b.Tracker().Live(sc.entries)
	sc.entries = tb.Entries
	up, down := tb.ClosedUp, tb.ClosedDown
	sc.out = append(sc.out, `{"connections":[`...)
	for i, e := range tb.Entries {
		if i > 0 {
			sc.out = append(sc.out, ',')
		}
		u, d := e.Bytes()
		up += u
		down += d
		sc.out = s.appendConn(sc.out, e, u, d)
		sc.spill()
	}
	sc.out = append(sc.out, `],"uploadTotal":`...)
	sc.out = strconv.AppendInt(sc.out, up, 10)
	sc.out = append(sc.out, `,"downloadTotal":`...)
	sc.out = strconv.AppendInt(sc.out, down, 10)
	sc.out = append(sc.out, `,"memory":`...)
	sc.out = strconv.AppendUint(sc.out, memInUse(), 10)
	sc.out = append(sc.out, "}\n"...)
	sc.flush()
	return sc.err
}

// byteTotals is every byte the tracker counted, closed flows' included.
func (s *Server) byteTotals() (up, down int64) {
	sc := getScratch(nil)
	defer sc.put()
	tb := s.b.Tracker().Live(sc.entries)
	sc.entries = tb.Entries
	return tb.Totals()
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
// every ?interval= ms (default 1000, at least 100).
func (s *Server) connections(w http.ResponseWriter, r *http.Request) {
	if !isUpgrade(r) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		s.writeSnapshot(w)
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
	s.serveWSWith(w, r, every, s.writeSnapshot)
}

func (s *Server) closeAll(w http.ResponseWriter, _ *http.Request) {
	tr := s.b.Tracker()
	for _, f := range tr.Flows() {
		tr.Kill(f.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) closeOne(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil || !s.b.Tracker().Kill(id) {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
