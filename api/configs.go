package api

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"

	"switchyard/plane"
)

// clashLevel is a spec log level in Clash's words.
func clashLevel(l string) string {
	switch l {
	case "trace", "debug":
		return "debug"
	case "warn":
		return "warning"
	case "error":
		return "error"
	}
	return "info"
}

// slogLevels are the levels PATCH /configs takes, Clash's and the spec's.
var slogLevels = map[string]slog.Level{
	"trace": slog.LevelDebug - 4, "debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError, "silent": slog.LevelError + 100,
}

// getConfigs is GET /configs: the inbounds' ports by kind and the logging,
// as Clash reports them, and the routing mode in force.
func (s *Server) getConfigs(w http.ResponseWriter, _ *http.Request) {
	sp := s.spec.Load()
	ports := map[string]int{"port": 0, "socks-port": 0, "mixed-port": 0}
	key := map[string]string{"http": "port", "socks": "socks-port", "mixed": "mixed-port"}
	allowLAN, bind := false, "127.0.0.1"
	tunInfo := map[string]any{"enable": false}
	for _, in := range sp.Inbounds {
		if in.TUN != nil {
			// A tun inbound listens on no address: Clash's tun block.
			tunInfo = map[string]any{"enable": true, "device": in.TUN.Name, "stack": "gvisor",
				"auto-route": in.TUN.AutoRoute, "mtu": in.TUN.MTU}
			continue
		}
		if k := key[in.Type]; k != "" && ports[k] == 0 {
			// The port bound (a listen on port 0 gets one of the kernel's).
			ports[k] = int(in.Listen.Port())
			if a, ok := s.b.Listening(in.Tag).(*net.TCPAddr); ok {
				ports[k] = a.Port
			}
		}
		if !in.Listen.Addr().IsLoopback() {
			allowLAN, bind = true, in.Listen.Addr().String()
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"port": ports["port"], "socks-port": ports["socks-port"], "mixed-port": ports["mixed-port"],
		"redir-port": 0, "tproxy-port": 0,
		"mode": s.b.Mode().String(), "mode-list": modeList,
		"log-level": *s.logLevel.Load(), "allow-lan": allowLAN, "bind-address": bind,
		"ipv6": true, "tun": tunInfo,
	})
}

// patchConfigs is PATCH /configs: "log-level" and "mode" can be written;
// any other key refuses the whole request, which then changes nothing.
func (s *Server) patchConfigs(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, errBadRequest)
		return
	}
	var level string
	var mode *plane.Mode
	var refused []string
	for k, v := range body {
		var str string
		switch k {
		case "log-level":
			if json.Unmarshal(v, &str) != nil {
				writeError(w, http.StatusBadRequest, "log-level must be a string")
				return
			}
			if _, ok := slogLevels[str]; !ok {
				writeError(w, http.StatusBadRequest, "log-level "+str+" is not one of debug, info, warning, error, silent")
				return
			}
			level = str
		case "mode":
			m, err := parseMode(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			mode = &m
		default:
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		writeError(w, http.StatusBadRequest, "cannot be changed through the API: "+strings.Join(refused, ", "))
		return
	}
	if level != "" {
		if s.opts.LogLevel != nil {
			s.opts.LogLevel.Set(slogLevels[level])
		}
		lvl := clashLevel(level)
		if level == "silent" {
			lvl = "silent"
		}
		s.logLevel.Store(&lvl)
		s.log.Info("log level changed", "level", lvl)
	}
	if mode != nil {
		if err := s.b.SetMode(*mode); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// putConfigs is PUT /configs {"path": ..., "payload": ...}: the
// configuration is reloaded from the payload (TOML), from the path, or,
// with neither, from the file the process runs, exactly as SIGHUP reloads
// it. 204 once it is applied; 400 with the refusal, the running
// configuration still serving.
func (s *Server) putConfigs(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		writeError(w, http.StatusNotFound, "reloading is not available")
		return
	}
	var body struct {
		Path    string `json:"path"`
		Payload string `json:"payload"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, errBadRequest)
			return
		}
	}
	if err := s.opts.Reload(body.Path, []byte(body.Payload)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
