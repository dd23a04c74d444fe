package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// metricsRoutes serves GET /metrics (the Prometheus exposition of
// Options.Metrics) inside the authenticated router: a scrape carries the
// bearer token like every other call.
func (s *Server) metricsRoutes(r chi.Router) {
	if s.opts.Metrics == nil {
		return
	}
	r.Method(http.MethodGet, "/metrics", s.opts.Metrics)
}
