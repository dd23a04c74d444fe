package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
)

// pprofEnv names the loopback address on which run serves net/http/pprof,
// for profiling under a benchmark. Unset, nothing is served.
const pprofEnv = "SWITCHYARD_PPROF"

// servePprof serves the profiling endpoints on the loopback address in
// SWITCHYARD_PPROF, if set, for the life of the process. An address that is
// not loopback, or that cannot be listened on, is logged and ignored.
func servePprof(log *slog.Logger) {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		log.Warn(pprofEnv+" ignored: want a loopback IP:port", "value", addr)
		return
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		log.Warn(pprofEnv+" ignored", "error", err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info(fmt.Sprintf("serving pprof on http://%s/debug/pprof/", ln.Addr()))
	go http.Serve(ln, mux) //nolint:errcheck // lives as long as the process
}
