package api

import "net/http"

// restart is POST /restart, metacubexd's "Restart Core", as mihomo
// answers it: {"status":"ok"} once the restart is under way, after which
// the process stops as on SIGTERM (this server among it, the answer
// already sent) and executes its own binary again with the same arguments
// and environment (Options.Restart). A restart that cannot begin is a 500
// with its reason; without the hook, 501.
func (s *Server) restart(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Restart == nil {
		writeError(w, http.StatusNotImplemented, "restarting is not available in this process")
		return
	}
	if err := s.opts.Restart(); err != nil {
		writeError(w, http.StatusInternalServerError, "restart: "+err.Error())
		return
	}
	s.log.Info("restart requested")
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
