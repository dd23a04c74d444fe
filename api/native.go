package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/warm"
)

// The native API, under /switchyard/v1/: what Clash's cannot say — a
// selector write per network, each group's selection chain and why its
// pick won per network, each node's six health states with their history,
// and the dial admission counts.

// admissionBackend gives the dial admission counts.
type admissionBackend interface {
	Admission() (generation, process netx.Stats)
}

// warmBackend gives a node's warm state (package warm).
type warmBackend interface {
	WarmNode(tag string) (warm.State, bool)
}

// warmJSON is a node's warm state: what it keeps (pool, session or
// none), its pooled connections and a pool's idle bound (and whether it
// is still being learned), whether its session is up, and which owners
// retain it.
type warmJSON struct {
	Kind        string     `json:"kind"`
	Pooled      int        `json:"pooled"`
	IdleBound   *float64   `json:"idle_bound_seconds,omitempty"`
	Learning    *bool      `json:"idle_bound_learning,omitempty"`
	Up          bool       `json:"up"`
	Owners      []string   `json:"owners"`
	LastAttempt *time.Time `json:"last_attempt,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

func warmOf(st warm.State) warmJSON {
	j := warmJSON{Kind: st.Kind.String(), Pooled: st.Pooled, Up: st.Up, Owners: []string{}, LastError: st.LastError}
	if st.Kind == outbound.WarmPool {
		b, l := st.IdleBound.Seconds(), st.Learning
		j.IdleBound, j.Learning = &b, &l
	}
	for _, o := range warm.Owners {
		if st.Owners&o.Bit != 0 {
			j.Owners = append(j.Owners, o.Name)
		}
	}
	if !st.LastAttempt.IsZero() {
		t := st.LastAttempt
		j.LastAttempt = &t
	}
	return j
}

func (s *Server) nativeRoutes(r chi.Router) {
	r.Get("/switchyard/v1/groups", s.nativeGroups)
	r.Get("/switchyard/v1/groups/{name}", s.nativeGroup)
	r.Get("/switchyard/v1/groups/{name}/score", s.nativeGroupScore)
	r.Put("/switchyard/v1/groups/{name}/select", s.nativeSelect)
	r.Get("/switchyard/v1/nodes/{name}", s.nativeNode)
	r.Get("/switchyard/v1/admission", s.nativeAdmission)
	r.Get("/switchyard/v1/connections", s.nativeConnections)
	r.Get("/switchyard/v1/stats/score", s.nativeScoreStats)
}

// nativeScoreStats is GET /switchyard/v1/stats/score: the Score engine's
// counters per Score group (by name) and network — the final reason of
// every rank, switches, candidates filtered or held back, the trial
// budget and the serving pool — and the evidence caches' totals. It names
// no node, target or cell. Without Score groups, groups is empty.
func (s *Server) nativeScoreStats(w http.ResponseWriter, _ *http.Request) {
	st := group.ScoreStats{Groups: []group.ScoreGroupStats{}}
	if m := s.b.Groups(); m != nil {
		st = m.ScoreStats()
	}
	writeJSON(w, http.StatusOK, st)
}

type candidateJSON struct {
	Member    string  `json:"member"`
	Kind      string  `json:"kind"`
	Leaf      string  `json:"leaf"`
	Eligible  bool    `json:"eligible"`
	Excluded  string  `json:"excluded,omitempty"`
	Why       string  `json:"why,omitempty"`
	LatencyMS float64 `json:"latency_ms,omitempty"`
	Measured  bool    `json:"measured"`
	Strikes   int     `json:"strikes"`
	// Utility is a Score member's utility in the aggregate ranking.
	Utility *float64 `json:"utility,omitempty"`
}

type pickJSON struct {
	Winner     string          `json:"winner"`
	Leaf       string          `json:"leaf"`
	Chain      []string        `json:"chain"`
	Final      string          `json:"final,omitempty"`
	Reason     string          `json:"reason"`
	Sentence   string          `json:"sentence"`
	Candidates []candidateJSON `json:"candidates"`
	Since      *time.Time      `json:"since,omitempty"`
	// Score is a Score group's aggregate summary (GET …/score's body
	// without group, network and family).
	Score *group.ScoreExplanation `json:"score,omitempty"`
}

type groupJSON struct {
	Tag       string              `json:"tag"`
	Policy    string              `json:"policy"`
	ID        string              `json:"id"`
	Created   time.Time           `json:"created"`
	Members   []string            `json:"members"`
	Final     string              `json:"final,omitempty"`
	Interrupt bool                `json:"interrupt"`
	Chosen    map[string]string   `json:"chosen,omitempty"`
	Networks  map[string]pickJSON `json:"networks"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pickOf(x group.Explanation) pickJSON {
	p := pickJSON{Winner: x.Winner, Leaf: x.Leaf, Chain: x.Chain, Final: x.Final, Reason: string(x.Reason), Sentence: x.Sentence, Score: x.Score}
	if !x.Since.IsZero() {
		t := x.Since
		p.Since = &t
	}
	for _, c := range x.Candidates {
		cj := candidateJSON{Member: c.Member, Kind: c.Kind, Leaf: c.Leaf, Eligible: c.Eligible,
			Excluded: string(c.Excluded), Why: c.Why, LatencyMS: ms(c.Latency), Measured: c.Measured, Strikes: c.Strikes}
		if c.Scored {
			u := c.Utility
			cj.Utility = &u
		}
		p.Candidates = append(p.Candidates, cj)
	}
	return p
}

func (s *Server) groupJSON(m *group.Manager, in group.Info) groupJSON {
	id := health.NodeID(in.Identity.ID)
	g := groupJSON{Tag: in.Tag, Policy: in.Policy, ID: id.String(), Created: in.Identity.Created, Members: in.Members,
		Final: in.Final, Interrupt: in.Interrupt, Networks: map[string]pickJSON{}}
	if in.Policy == "selector" {
		g.Chosen = map[string]string{"tcp": in.Chosen[0], "udp": in.Chosen[1]}
	}
	for _, n := range [...]netx.Network{netx.TCP, netx.UDP} {
		g.Networks[n.String()] = pickOf(m.Explain(in.Tag, n, netx.V4))
	}
	return g
}

func (s *Server) nativeGroups(w http.ResponseWriter, _ *http.Request) {
	out := []groupJSON{}
	if m := s.b.Groups(); m != nil {
		for _, in := range m.Groups() {
			out = append(out, s.groupJSON(m, in))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

func (s *Server) nativeGroup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if m := s.b.Groups(); m != nil {
		for _, in := range m.Groups() {
			if in.Tag == name {
				writeJSON(w, http.StatusOK, s.groupJSON(m, in))
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, errNotFound)
}

// nativeSelect is PUT /switchyard/v1/groups/{name}/select
// {"member": …, "network": "tcp" | "udp" | "both"}: the selector's choice
// for that network (both when omitted), and how many flows through the
// old choice were interrupted.
func (s *Server) nativeSelect(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Member  string `json:"member"`
		Network string `json:"network"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.Member == "" {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	var nets []netx.Network
	switch body.Network {
	case "", "both":
	case "tcp":
		nets = []netx.Network{netx.TCP}
	case "udp":
		nets = []netx.Network{netx.UDP}
	default:
		writeError(w, http.StatusBadRequest, `network must be "tcp", "udp" or "both"`)
		return
	}
	n, err := s.b.SelectGroup(chi.URLParam(r, "name"), body.Member, nets...)
	switch {
	case errors.Is(err, group.ErrUnknownGroup):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]int{"interrupted": n})
	}
}

type sampleJSON struct {
	Time      time.Time `json:"time"`
	DelayMS   float64   `json:"delay_ms"`
	OK        bool      `json:"ok"`
	Synthetic bool      `json:"synthetic,omitempty"`
}

type stateJSON struct {
	Observed        bool         `json:"observed"`
	Alive           bool         `json:"alive"`
	ProbeFailures   int          `json:"probe_failures"`
	TrafficFailures int          `json:"traffic_failures"`
	CooldownUntil   *time.Time   `json:"cooldown_until,omitempty"`
	LatencyMS       *float64     `json:"latency_ms,omitempty"`
	History         []sampleJSON `json:"history"`
}

// nativeNode is GET /switchyard/v1/nodes/{name}: the node's six health
// states (tcp, dns_udp, data_udp × ipv4, ipv6) with their history, its
// strikes, its last real delay and, for a node that can keep something
// warm, its warm state.
func (s *Server) nativeNode(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	id, ok := s.b.NodeID(name)
	h := s.b.Health()
	if !ok || h == nil {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	st, ok := h.State(id)
	if !ok {
		writeError(w, http.StatusNotFound, "the node is not probed: no group reaches it")
		return
	}
	states := map[string]map[string]stateJSON{}
	for _, d := range health.Domains {
		states[d.String()] = map[string]stateJSON{}
		for _, f := range health.Families {
			ds := st.Of(d, f)
			j := stateJSON{Observed: ds.Observed, Alive: ds.Alive, ProbeFailures: ds.ProbeFailures, TrafficFailures: ds.TrafficFailures, History: []sampleJSON{}}
			if !ds.CooldownUntil.IsZero() {
				t := ds.CooldownUntil
				j.CooldownUntil = &t
			}
			if ds.HasLatency {
				v := ms(ds.Latency)
				j.LatencyMS = &v
			}
			for _, smp := range ds.History {
				j.History = append(j.History, sampleJSON{Time: smp.Time, DelayMS: ms(smp.Delay), OK: smp.Delay > 0, Synthetic: smp.Synthetic})
			}
			fam := "ipv4"
			if f == netx.V6 {
				fam = "ipv6"
			}
			states[d.String()][fam] = j
		}
	}
	out := map[string]any{"name": name, "id": id.String(), "strikes": st.Strikes, "states": states}
	if st.HasLastReal {
		out["last_real_delay_ms"] = ms(st.LastReal.Delay)
	}
	if b, ok := s.b.(warmBackend); ok {
		if ws, ok := b.WarmNode(name); ok {
			out["warm"] = warmOf(ws)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// nativeAdmission is GET /switchyard/v1/admission: the generation's dial
// admission and the process gate every generation shares.
func (s *Server) nativeAdmission(w http.ResponseWriter, _ *http.Request) {
	b, ok := s.b.(admissionBackend)
	if !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	gen, proc := b.Admission()
	stats := func(st netx.Stats) map[string]any {
		return map[string]any{"limit": st.Limit, "in_use": st.InUse, "waiting": st.Waiting}
	}
	writeJSON(w, http.StatusOK, map[string]any{"generation": stats(gen), "process": stats(proc)})
}
