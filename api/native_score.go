package api

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"switchyard/group"
	"switchyard/netx"
)

// scoreExplainJSON is GET /switchyard/v1/groups/{name}/score's body: the
// Score group's readonly conditional-verification summary for one network
// and family, members by tag. An exact-target read says exact and echoes
// no target.
type scoreExplainJSON struct {
	Group   string `json:"group"`
	Network string `json:"network"`
	Family  string `json:"family"`
	group.ScoreExplanation
}

// nativeGroupScore is GET /switchyard/v1/groups/{name}/score
// ?network=tcp|udp&family=ipv4|ipv6[&target=host:port]: the Score
// engine's explanation of the group — the aggregate read of (network,
// family), or with target that exact target's — without node, cell or
// target identity. The read advances no clock, trial or counter.
func (s *Server) nativeGroupScore(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	network := netx.TCP
	switch q.Get("network") {
	case "", "tcp":
	case "udp":
		network = netx.UDP
	default:
		writeError(w, http.StatusBadRequest, `network must be "tcp" or "udp"`)
		return
	}
	fam := netx.V4
	switch q.Get("family") {
	case "", "ipv4":
	case "ipv6":
		fam = netx.V6
	default:
		writeError(w, http.StatusBadRequest, `family must be "ipv4" or "ipv6"`)
		return
	}
	var target netx.Addr
	if t := q.Get("target"); t != "" {
		a, err := netx.ParseAddr(t)
		if err != nil {
			writeError(w, http.StatusBadRequest, "target must be host:port")
			return
		}
		target = a
	}
	m := s.b.Groups()
	if m == nil {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	name := chi.URLParam(r, "name")
	x, err := m.ExplainScore(name, network, fam, target)
	switch {
	case errors.Is(err, group.ErrUnknownGroup):
		writeError(w, http.StatusNotFound, errNotFound)
		return
	case errors.Is(err, group.ErrNotScore):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "target cannot key Score evidence")
		return
	}
	writeJSON(w, http.StatusOK, scoreExplainJSON{Group: name, Network: network.String(), Family: familyName(fam), ScoreExplanation: x})
}

func familyName(f netx.Family) string {
	if f == netx.V6 {
		return "ipv6"
	}
	return "ipv4"
}
