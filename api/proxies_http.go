package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"switchyard/group"
	"switchyard/health"
	"switchyard/plane"
)

// nameParam is the {name} of the path, unescaped.
func nameParam(r *http.Request) string {
	n := chi.URLParam(r, "name")
	if u, err := url.PathUnescape(n); err == nil {
		return u
	}
	return n
}

func (s *Server) listProxies(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"proxies": s.view().all()})
}

func (s *Server) getProxy(w http.ResponseWriter, r *http.Request) {
	p, ok := s.view().proxy(nameParam(r))
	if !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) listGroups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"proxies": s.view().groupList()})
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	p, ok := s.view().proxy(nameParam(r))
	if !ok || p.groupFields == nil || p.Name == global {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// selectProxy is PUT /proxies/{name} {"name": member}: a selector's new
// choice on both networks, or GLOBAL's. The supervisor interrupts the flows
// through the old choice when the group says so (GLOBAL interrupts none).
func (s *Server) selectProxy(w http.ResponseWriter, r *http.Request) {
	name := nameParam(r)
	var body struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.Name == "" {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	if name == global {
		s.selectGlobal(w, body.Name)
		return
	}
	v := s.view()
	if _, ok := v.proxy(name); !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	if _, ok := v.infos[name]; !ok {
		writeError(w, http.StatusBadRequest, "Must be a Selector")
		return
	}
	n, err := s.b.SelectGroup(name, body.Name)
	switch {
	case errors.Is(err, group.ErrUnknownGroup):
		writeError(w, http.StatusNotFound, errNotFound)
		return
	case errors.Is(err, group.ErrNotSelector):
		writeError(w, http.StatusBadRequest, "Must be a Selector")
		return
	case errors.Is(err, group.ErrNotMember):
		writeError(w, http.StatusBadRequest, "Selector update error: "+body.Name+" is not a member of "+name)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.log.Info("selector choice changed", "group", name, "member", body.Name, "interrupted", n)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) selectGlobal(w http.ResponseWriter, member string) {
	switch err := s.b.SelectGlobal(member); {
	case errors.Is(err, plane.ErrNotGlobalMember):
		writeError(w, http.StatusBadRequest, "Selector update error: "+member+" is not a member of "+global)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unfixProxy is DELETE /proxies/{name}, mihomo's unfix: a Selector's (and
// GLOBAL's) choice is dropped back to its default, a URLTest or Fallback
// has no fixed choice to drop (PUT writes Selectors only), anything else
// is 400. See the package doc.
func (s *Server) unfixProxy(w http.ResponseWriter, r *http.Request) {
	name := nameParam(r)
	v := s.view()
	p, ok := v.proxy(name)
	if !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	switch {
	case name == global:
		if err := s.b.ClearGlobal(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	case p.Type == "Selector":
		n, err := s.b.ClearSelector(name)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.log.Info("selector choice cleared", "group", name, "interrupted", n)
	case p.Type == "URLTest" || p.Type == "Fallback":
		// Nothing is fixed: PUT /proxies/{name} writes Selectors only.
	default:
		writeError(w, http.StatusBadRequest, "Must be a Selector, URLTest or Fallback")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// delayParams reads ?url and ?timeout (ms; absent: health's check timeout).
func delayParams(r *http.Request) (u string, timeout time.Duration, ok bool) {
	q := r.URL.Query()
	u = q.Get("url")
	if u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return "", 0, false
		}
	}
	if t := q.Get("timeout"); t != "" {
		ms, err := strconv.ParseUint(t, 10, 31)
		if err != nil || ms == 0 {
			return "", 0, false
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	return u, timeout, true
}

// isTimeout reports whether a delay test failed by running out of time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// proxyDelay is GET /proxies/{name}/delay: one delay test of the outbound
// (a group's current leaf), recorded in its health like a probe. ?expected
// is accepted and not applied: the probe judges the status itself.
// engineNode is leaf's node identity when the health engine holds it.
func (s *Server) engineNode(v *view, leaf string) (health.NodeID, bool) {
	id, ok := s.b.NodeID(leaf)
	if !ok || v.eng == nil {
		return health.NodeID{}, false
	}
	_, ok = v.eng.State(id)
	return id, ok
}

// delayTester measures an outbound the health engine does not hold (one
// no group reaches); the supervisor is one.
type delayTester interface {
	DelayTest(ctx context.Context, tag, url string, timeout time.Duration) (health.Result, error)
}

func (s *Server) proxyDelay(w http.ResponseWriter, r *http.Request) {
	u, timeout, ok := delayParams(r)
	if !ok {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	v := s.view()
	if _, ok := v.proxy(nameParam(r)); !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	leaf, ok := v.leafOf(nameParam(r))
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "An error occurred in the delay test: no outbound to measure")
		return
	}
	start := time.Now()
	var res health.Result
	var err error
	if id, ok := s.engineNode(v, leaf); ok {
		res, err = v.eng.Delay(r.Context(), id, u, timeout)
	} else if dt, ok := s.b.(delayTester); ok {
		res, err = dt.DelayTest(r.Context(), leaf, u, timeout)
	} else {
		writeError(w, http.StatusServiceUnavailable, "An error occurred in the delay test: "+leaf+" is not health-checked")
		return
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]int64{"delay": delayMS(res.RTT)})
	case isTimeout(err) || (timeout > 0 && time.Since(start) >= timeout):
		writeError(w, http.StatusGatewayTimeout, "Timeout")
	default:
		writeError(w, http.StatusServiceUnavailable, "An error occurred in the delay test")
	}
}

// groupDelay is GET /group/{name}/delay: a delay test of every member's
// current leaf, at most health.DelayConcurrency at a time, answered as
// member -> delay for the members that answered.
func (s *Server) groupDelay(w http.ResponseWriter, r *http.Request) {
	u, timeout, ok := delayParams(r)
	if !ok {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	v := s.view()
	name := nameParam(r)
	if _, ok := v.infos[name]; !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	out := map[string]int64{}
	if members := v.groups.DelayTestMembers(name); v.eng != nil && len(members) > 0 {
		ids := make([]health.NodeID, len(members))
		for i, m := range members {
			ids[i] = m.Node
		}
		for i, res := range v.eng.DelayMany(r.Context(), ids, u, timeout) {
			if res.Err == nil {
				out[members[i].Member] = delayMS(res.Result.RTT)
			}
		}
	}
	if len(out) == 0 {
		writeError(w, http.StatusGatewayTimeout, "Timeout")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
