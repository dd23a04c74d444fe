package api

import (
	"context"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"switchyard/health"
	"switchyard/remote"
	"switchyard/ruleset"
	"switchyard/spec"
)

// Downloads is what the API reads and drives of the url providers' and
// rule sets' downloads (a *remote.Updater satisfies it).
type Downloads interface {
	// Status is the published snapshot of every download.
	Status() []remote.Status
	// Update downloads one now and applies a change before it returns.
	Update(ctx context.Context, kind, tag string) error
}

// proxyProvider is one [[providers]] as mihomo's /providers/proxies
// shows it.
type proxyProvider struct {
	Name             string           `json:"name"`
	Type             string           `json:"type"`
	VehicleType      string           `json:"vehicleType"`
	Proxies          []proxy          `json:"proxies"`
	TestURL          string           `json:"testUrl"`
	ExpectedStatus   string           `json:"expectedStatus"`
	UpdatedAt        *time.Time       `json:"updatedAt,omitempty"`
	SubscriptionInfo *remote.UserInfo `json:"subscriptionInfo,omitempty"`
}

// ruleProvider is one [[rule_sets]] as mihomo's /providers/rules shows it.
type ruleProvider struct {
	Name        string     `json:"name"`
	Type        string     `json:"type"`
	VehicleType string     `json:"vehicleType"`
	Behavior    string     `json:"behavior"`
	Format      string     `json:"format"`
	RuleCount   int        `json:"ruleCount"`
	UpdatedAt   *time.Time `json:"updatedAt,omitempty"`
}

// behaviors are mihomo's behavior names of the rule-set formats; a
// sing-box rule set is a list of rules, as a classical one.
var behaviors = map[string]string{
	"clash-domain": "Domain", "clash-ipcidr": "IPCIDR", "clash-classical": "Classical",
	"srs": "Classical", "source": "Classical",
}

func (s *Server) providerRoutes(r chi.Router) {
	r.Get("/providers/proxies", s.listProxyProviders)
	r.Get("/providers/proxies/{name}", s.getProxyProvider)
	r.Put("/providers/proxies/{name}", s.updateProxyProvider)
	r.Get("/providers/proxies/{name}/healthcheck", s.providerHealthcheck)
	r.Get("/providers/proxies/{provider}/{name}/healthcheck", s.providerProxyDelay)
	r.Get("/providers/rules", s.listRuleProviders)
	r.Put("/providers/rules/{name}", s.updateRuleProvider)
}

// downloadStatus is the downloads' status by kind and tag.
func (s *Server) downloadStatus() map[[2]string]remote.Status {
	out := map[[2]string]remote.Status{}
	if s.opts.Downloads == nil {
		return out
	}
	for _, st := range s.opts.Downloads.Status() {
		out[[2]string{st.Kind, st.Tag}] = st
	}
	return out
}

// fileTime is the modification time of a file read at load.
func fileTime(path string) *time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	t := fi.ModTime()
	return &t
}

func (s *Server) proxyProviders() map[string]proxyProvider {
	v := s.view()
	st := s.downloadStatus()
	testURL := health.DefaultDelayURL
	if len(v.sp.Health.TCPCheckURLs) > 0 {
		testURL = v.sp.Health.TCPCheckURLs[0]
	}
	out := make(map[string]proxyProvider, len(v.sp.Providers))
	for _, p := range v.sp.Providers {
		pp := proxyProvider{Name: p.Tag, Type: "Proxy", VehicleType: "File", TestURL: testURL, Proxies: make([]proxy, 0, len(p.Nodes))}
		for _, n := range p.Nodes {
			if x, ok := v.proxy(n); ok {
				pp.Proxies = append(pp.Proxies, x)
			}
		}
		if p.URL != "" {
			pp.VehicleType = "HTTP"
			if d, ok := st[[2]string{remote.KindProvider, p.Tag}]; ok {
				if !d.UpdatedAt.IsZero() {
					t := d.UpdatedAt
					pp.UpdatedAt = &t
				}
				pp.SubscriptionInfo = d.UserInfo
			}
		} else {
			pp.UpdatedAt = fileTime(p.Path)
		}
		out[p.Tag] = pp
	}
	return out
}

func (s *Server) listProxyProviders(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"providers": s.proxyProviders()})
}

func (s *Server) getProxyProvider(w http.ResponseWriter, r *http.Request) {
	p, ok := s.proxyProviders()[nameParam(r)]
	if !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) updateProxyProvider(w http.ResponseWriter, r *http.Request) {
	name := nameParam(r)
	for _, p := range s.spec.Load().Providers {
		if p.Tag == name {
			s.update(w, r, remote.KindProvider, name, p.URL != "")
			return
		}
	}
	writeError(w, http.StatusNotFound, errNotFound)
}

func (s *Server) updateRuleProvider(w http.ResponseWriter, r *http.Request) {
	name := nameParam(r)
	for _, rs := range s.spec.Load().RuleSets {
		if rs.Tag == name {
			s.update(w, r, remote.KindRuleSet, name, rs.URL != "")
			return
		}
	}
	writeError(w, http.StatusNotFound, errNotFound)
}

// update is PUT /providers/{proxies|rules}/{name}: a url one is
// downloaded now and a change applied before the answer (204); a file
// one is read again, as mihomo does, by applying the running
// configuration again (Options.Reapply). A failure answers its message
// with 503 (the download or the apply failed) or 501 (nothing here can
// update it).
func (s *Server) update(w http.ResponseWriter, r *http.Request, kind, tag string, remoteOne bool) {
	var err error
	switch {
	case remoteOne && s.opts.Downloads != nil:
		err = s.opts.Downloads.Update(r.Context(), kind, tag)
	case !remoteOne && s.opts.Reapply != nil:
		err = s.opts.Reapply()
	default:
		writeError(w, http.StatusNotImplemented, "this process does not update "+tag)
		return
	}
	if err != nil {
		s.log.Warn("update failed", "kind", kind, "tag", tag, "error", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// providerHealthcheck is GET /providers/proxies/{name}/healthcheck: a
// delay test of every node of the provider, answered once all are done
// (204). A node the health engine holds records the result in its health;
// one no group reaches is measured and not recorded.
func (s *Server) providerHealthcheck(w http.ResponseWriter, r *http.Request) {
	u, timeout, ok := delayParams(r)
	if !ok {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	v := s.view()
	if u == "" && len(v.sp.Health.TCPCheckURLs) > 0 {
		u = v.sp.Health.TCPCheckURLs[0] // the provider's testUrl
	}
	var nodes []string
	found := false
	for _, p := range v.sp.Providers {
		if p.Tag == nameParam(r) {
			nodes, found = p.Nodes, true
		}
	}
	if !found {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	var ids []health.NodeID
	var others []string
	for _, n := range nodes {
		if id, ok := s.engineNode(v, n); ok {
			ids = append(ids, id)
		} else {
			others = append(others, n)
		}
	}
	var wg sync.WaitGroup
	if len(ids) > 0 {
		wg.Add(1)
		go func() { // owned by this request: waited for below
			defer wg.Done()
			v.eng.DelayMany(r.Context(), ids, u, timeout)
		}()
	}
	if dt, ok := s.b.(delayTester); ok && len(others) > 0 {
		sem := make(chan struct{}, health.DelayConcurrency)
		for _, n := range others {
			wg.Add(1)
			sem <- struct{}{}
			go func() { // owned by this request: waited for below
				defer wg.Done()
				defer func() { <-sem }()
				dt.DelayTest(r.Context(), n, u, timeoutOr(timeout, v.sp.Health.CheckTimeout))
			}()
		}
	}
	wg.Wait()
	w.WriteHeader(http.StatusNoContent)
}

func timeoutOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	if def > 0 {
		return def
	}
	return 5 * time.Second
}

// providerProxyDelay is GET /providers/proxies/{provider}/{name}/healthcheck:
// one node's delay test, as GET /proxies/{name}/delay.
func (s *Server) providerProxyDelay(w http.ResponseWriter, r *http.Request) {
	prov, node := chi.URLParam(r, "provider"), nameParam(r)
	for _, p := range s.spec.Load().Providers {
		if p.Tag != prov {
			continue
		}
		for _, n := range p.Nodes {
			if n == node {
				s.proxyDelay(w, r)
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, errNotFound)
}

func (s *Server) listRuleProviders(w http.ResponseWriter, _ *http.Request) {
	sp := s.spec.Load()
	st := s.downloadStatus()
	out := make(map[string]ruleProvider, len(sp.RuleSets))
	for _, rs := range sp.RuleSets {
		rp := ruleProvider{Name: rs.Tag, Type: "Rule", VehicleType: "File", Behavior: behaviors[rs.Format], Format: rs.Format,
			RuleCount: s.ruleCount(rs)}
		if rs.URL != "" {
			rp.VehicleType = "HTTP"
			if d, ok := st[[2]string{remote.KindRuleSet, rs.Tag}]; ok && !d.UpdatedAt.IsZero() {
				t := d.UpdatedAt
				rp.UpdatedAt = &t
			}
		} else {
			rp.UpdatedAt = fileTime(rs.Path)
		}
		out[rs.Tag] = rp
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": out})
}

// ruleCounts keeps the entry count of each rule-set content shown, by
// its SHA-256 and format: the compiled set is not loaded per request.
// Bounded: it starts over past maxRuleCounts.
var ruleCounts = struct {
	sync.Mutex
	m map[[2]string]int
}{m: map[[2]string]int{}}

const maxRuleCounts = 256

// ruleCount is the number of entries of rs as loaded; 0 before a url
// rule set's first download.
func (s *Server) ruleCount(rs spec.RuleSet) int {
	if rs.Path == "" || rs.Sum == "" {
		return 0
	}
	k := [2]string{rs.Sum, rs.Format}
	ruleCounts.Lock()
	n, ok := ruleCounts.m[k]
	ruleCounts.Unlock()
	if ok {
		return n
	}
	set, err := ruleset.Load(rs.Path, rs.Format)
	if err != nil {
		return 0
	}
	n = set.Entries()
	ruleCounts.Lock()
	if len(ruleCounts.m) >= maxRuleCounts {
		clear(ruleCounts.m)
	}
	ruleCounts.m[k] = n
	ruleCounts.Unlock()
	return n
}
