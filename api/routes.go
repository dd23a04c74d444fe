package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/cors"
)

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.guardHost)
	r.Use(cors.Handler(cors.Options{
		AllowOriginFunc: func(_ *http.Request, origin string) bool { return s.originAllowed(origin) },
		AllowedMethods:  []string{"GET", "POST", "PUT", "PATCH", "DELETE"},
		AllowedHeaders:  []string{"Authorization", "Content-Type"},
		MaxAge:          int((10 * time.Minute).Seconds()),
	}))
	r.Use(s.guardOrigin)
	if s.opts.ExternalUI != "" {
		r.Get("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently).ServeHTTP)
		r.Get("/ui/*", http.StripPrefix("/ui/", http.FileServer(http.Dir(s.opts.ExternalUI))).ServeHTTP)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.guardSecret)
		r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"hello": "switchyard"})
		})
		r.Get("/version", s.version)
		r.Get("/proxies", s.listProxies)
		r.Get("/proxies/{name}", s.getProxy)
		r.Put("/proxies/{name}", s.selectProxy)
		r.Delete("/proxies/{name}", s.unfixProxy)
		r.Get("/proxies/{name}/delay", s.proxyDelay)
		r.Get("/group", s.listGroups)
		r.Get("/group/{name}", s.getGroup)
		r.Get("/group/{name}/delay", s.groupDelay)
		s.providerRoutes(r)
		r.Get("/connections", s.connections)
		r.Delete("/connections", s.closeAll)
		r.Delete("/connections/{id}", s.closeOne)
		r.Get("/traffic", s.traffic)
		r.Get("/memory", s.memory)
		r.Get("/configs", s.getConfigs)
		r.Patch("/configs", s.patchConfigs)
		r.Put("/configs", s.putConfigs)
		r.Post("/restart", s.restart)
		r.Get("/logs", s.logs)
		r.Get("/rules", s.rules)
		r.Patch("/rules/disable", s.disableRules)
		s.nativeRoutes(r)
		s.metricsRoutes(r)
		r.Get("/dns/query", s.queryDNS)
		r.Post("/cache/dns/flush", s.flushDNS)
		r.Post("/cache/fakeip/flush", s.flushFakeIPs)
	})
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, errNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "Method not allowed")
	})
	return r
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	v := s.opts.Version
	if v == "" {
		v = "dev"
	}
	writeJSON(w, http.StatusOK, map[string]any{"meta": true, "version": v})
}
