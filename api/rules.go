package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"switchyard/plane"
	"switchyard/spec"
)

// planeBackend gives the plane in force (its rules' hit counts).
type planeBackend interface {
	Plane() *plane.Plane
}

// ruleJSON is one rule as GET /rules lists it.
type ruleJSON struct {
	Type    string `json:"type"`
	Payload string `json:"payload"`
	Proxy   string `json:"proxy"`
	Size    int    `json:"size"`
	Index   int    `json:"index"`
	Hits    uint64 `json:"hitCount"`
	// Extra is mihomo's per-rule state, where dashboards read it: the
	// switch and the hit count (no miss counts or times are kept).
	Extra ruleExtra `json:"extra"`
}

type ruleExtra struct {
	Disabled bool   `json:"disabled"`
	Hits     uint64 `json:"hitCount"`
}

// rules is GET /rules: every rule in order, then the final target as
// Clash's MATCH, with the flows each routed since the last reload. A rule
// of one key and one value is named as Clash names it (DomainSuffix,
// IPCIDR, DstPort…); any other is an AND of its keys, its payload listing
// them.
func (s *Server) rules(w http.ResponseWriter, _ *http.Request) {
	sp := s.spec.Load()
	var hits []uint64
	var off []bool
	if b, ok := s.b.(planeBackend); ok {
		if p := b.Plane(); p != nil && len(p.Rules) == len(sp.Rules) {
			hits, off = p.Hits(), p.Disabled()
		}
	}
	hit := func(i int) uint64 {
		if i < len(hits) {
			return hits[i]
		}
		return 0
	}
	out := make([]ruleJSON, 0, len(sp.Rules)+1)
	for i, r := range sp.Rules {
		typ, payload := describeRule(r)
		out = append(out, ruleJSON{Type: typ, Payload: payload, Proxy: r.Outbound, Size: -1, Index: i, Hits: hit(i),
			Extra: ruleExtra{Disabled: i < len(off) && off[i], Hits: hit(i)}})
	}
	final := len(sp.Rules)
	out = append(out, ruleJSON{Type: "Match", Proxy: sp.Route.Final, Size: -1, Index: final, Hits: hit(final),
		Extra: ruleExtra{Hits: hit(final)}})
	writeJSON(w, http.StatusOK, map[string]any{"rules": out})
}

// disableRules is PATCH /rules/disable {"<index>": true|false, ...}, as
// mihomo takes it: the rules of those indexes (GET /rules' index) are
// switched off, or back on, for the flows routed after it; open flows keep
// their route. The switches belong to the rules in force: a reload
// starts with every rule on, as mihomo's does. The final (Match) cannot
// be switched off (it is where a flow no rule matches goes; switching it
// on is a no-op); an index that is no rule refuses the whole request,
// which then changes nothing. 204.
func (s *Server) disableRules(w http.ResponseWriter, r *http.Request) {
	var body map[string]bool
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	b, ok := s.b.(planeBackend)
	var p *plane.Plane
	if ok {
		p = b.Plane()
	}
	if p == nil {
		writeError(w, http.StatusServiceUnavailable, "no rules are in force")
		return
	}
	change := make(map[int]bool, len(body))
	for k, v := range body {
		i, err := strconv.Atoi(k)
		if err != nil {
			writeError(w, http.StatusBadRequest, "rule index "+strconv.Quote(k)+" is not a number")
			return
		}
		if i == len(p.Rules) && v {
			writeError(w, http.StatusBadRequest, "the final (Match) cannot be switched off")
			return
		}
		if i != len(p.Rules) {
			change[i] = v
		}
	}
	if err := p.SetDisabled(change); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for i, v := range change {
		if v {
			s.log.Info("rule switched off", "index", i, "rule", plane.RuleName(i))
		} else {
			s.log.Info("rule switched on", "index", i, "rule", plane.RuleName(i))
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// describeRule names a rule's keys as Clash rule types.
func describeRule(r spec.Rule) (typ, payload string) {
	type key struct {
		clash, name string
		values      []string
	}
	var keys []key
	add := func(clash, name string, values []string) {
		if len(values) > 0 {
			keys = append(keys, key{clash, name, values})
		}
	}
	add("InName", "inbound", r.Inbound)
	if r.Network != "" {
		add("Network", "network", []string{r.Network})
	}
	add("Domain", "domain", r.Domain)
	add("DomainSuffix", "domain_suffix", r.DomainSuffix)
	add("DomainKeyword", "domain_keyword", r.DomainKeyword)
	add("DomainRegex", "domain_regex", r.DomainRegex)
	add("IPCIDR", "ip_cidr", stringsOf(r.IPCIDR))
	add("SrcIPCIDR", "source_ip_cidr", stringsOf(r.SourceIPCIDR))
	ports := make([]string, 0, len(r.Port)+len(r.PortRange))
	for _, p := range r.Port {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	for _, pr := range r.PortRange {
		ports = append(ports, strconv.Itoa(int(pr.Lo))+"-"+strconv.Itoa(int(pr.Hi)))
	}
	add("DstPort", "port", ports)
	add("InUser", "user", r.User)
	add("Protocol", "protocol", r.Protocol)
	sets := make([]string, len(r.RuleSet))
	for i, rs := range r.RuleSet {
		sets[i] = rs.Tag
	}
	add("RuleSet", "rule_set", sets)
	add("GEOIP", "geoip", r.GeoIP)
	switch {
	case len(keys) == 0:
		return "Match", ""
	case len(keys) == 1 && len(keys[0].values) == 1:
		return keys[0].clash, keys[0].values[0]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.name + "=" + strings.Join(k.values, ",")
	}
	if len(keys) == 1 {
		return keys[0].clash, strings.Join(keys[0].values, ",")
	}
	return "AND", strings.Join(parts, "; ")
}

func stringsOf[T interface{ String() string }](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}
