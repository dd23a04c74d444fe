package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
)

// dnsBackend is what the DNS endpoints need of the backend; a backend
// without it answers them 404.
type dnsBackend interface {
	HasDNS() bool
	QueryDNS(ctx context.Context, name string, qtype uint16) (*mdns.Msg, error)
	FlushDNS()
}

// dnsOf is the backend's DNS, when a [dns] table is in force.
func (s *Server) dnsOf() (dnsBackend, bool) {
	b, ok := s.b.(dnsBackend)
	return b, ok && b.HasDNS()
}

// dnsQueryTimeout bounds one /dns/query.
const dnsQueryTimeout = 10 * time.Second

// queryDNS answers GET /dns/query?name=&type= as mihomo does: the answer
// in the JSON form of DNS-over-HTTPS APIs (Status, Question, Answer, …),
// asked through the DNS rules and the cache.
func (s *Server) queryDNS(w http.ResponseWriter, r *http.Request) {
	b, ok := s.dnsOf()
	name := r.URL.Query().Get("name")
	if !ok {
		writeError(w, http.StatusNotFound, "DNS section is disabled")
		return
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "name is required")
		return
	}
	qtype := mdns.TypeA
	if t := strings.ToUpper(r.URL.Query().Get("type")); t != "" {
		v, ok := mdns.StringToType[t]
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid query type")
			return
		}
		qtype = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), dnsQueryTimeout)
	defer cancel()
	m, err := b.QueryDNS(ctx, name, qtype)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	type question struct {
		Name   string `json:"Name"`
		Qtype  uint16 `json:"Qtype"`
		Qclass uint16 `json:"Qclass"`
	}
	type record struct {
		Name string `json:"name"`
		Type uint16 `json:"type"`
		TTL  uint32 `json:"TTL"`
		Data string `json:"data"`
	}
	records := func(rrs []mdns.RR) []record {
		out := make([]record, 0, len(rrs))
		for _, rr := range rrs {
			h := rr.Header()
			data := strings.TrimPrefix(rr.String(), h.String())
			out = append(out, record{Name: h.Name, Type: h.Rrtype, TTL: h.Ttl, Data: strings.TrimSpace(data)})
		}
		return out
	}
	qs := make([]question, 0, len(m.Question))
	for _, q := range m.Question {
		qs = append(qs, question{Name: q.Name, Qtype: q.Qtype, Qclass: q.Qclass})
	}
	resp := map[string]any{
		"Status":   m.Rcode,
		"Question": qs,
		"TC":       m.Truncated,
		"RD":       m.RecursionDesired,
		"RA":       m.RecursionAvailable,
		"AD":       m.AuthenticatedData,
		"CD":       m.CheckingDisabled,
	}
	if len(m.Answer) > 0 {
		resp["Answer"] = records(m.Answer)
	}
	if len(m.Ns) > 0 {
		resp["Authority"] = records(m.Ns)
	}
	if len(m.Extra) > 0 {
		resp["Additional"] = records(m.Extra)
	}
	writeJSON(w, http.StatusOK, resp)
}

// flushDNS answers POST /cache/dns/flush: the DNS cache is emptied (204).
func (s *Server) flushDNS(w http.ResponseWriter, _ *http.Request) {
	b, ok := s.dnsOf()
	if !ok {
		writeError(w, http.StatusNotFound, "DNS section is disabled")
		return
	}
	b.FlushDNS()
	w.WriteHeader(http.StatusNoContent)
}

// fakeIPBackend is what POST /cache/fakeip/flush needs of the backend.
type fakeIPBackend interface {
	FlushFakeIPs() (int, bool)
}

// flushFakeIPs answers POST /cache/fakeip/flush: every fake IP mapping is
// forgotten (204); 404 without fake IPs.
func (s *Server) flushFakeIPs(w http.ResponseWriter, _ *http.Request) {
	b, ok := s.b.(fakeIPBackend)
	if ok {
		_, ok = b.FlushFakeIPs()
	}
	if !ok {
		writeError(w, http.StatusNotFound, "fake IPs are disabled")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
