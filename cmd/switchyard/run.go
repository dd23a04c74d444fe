package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"switchyard/api"
	"switchyard/config"
	"switchyard/metrics"
	"switchyard/spec"
	"switchyard/store"
	"switchyard/supervisor"
)

// shutdownGrace bounds how long stopping may take before the process exits
// anyway.
const shutdownGrace = 4 * time.Second

func runCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "run [-c FILE]",
		Short: "Serve a configuration (the embedded default without -c)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, warns, err := load(path)
			if err != nil {
				var errs config.Errors
				if errors.As(err, &errs) {
					for _, e := range errs {
						fmt.Fprintln(os.Stderr, e)
					}
				} else {
					fmt.Fprintln(os.Stderr, err)
				}
				return exitError{1}
			}
			log, level := newLeveledLogger(s.Log, os.Stderr)
			hub := api.NewLogHub()
			log = slog.New(hub.Handler(log.Handler()))
			slog.SetDefault(log)
			logWarnings(log, warns)
			servePprof(log)
			// The embedded default's API is a convenience: a taken port
			// leaves the proxy running without it.
			err = serve(s, func() (*spec.Spec, config.Warnings, error) { return load(path) }, log,
				serveOptions{level: level, apiOptional: path == "", logs: hub})
			var restart restartError
			if errors.As(err, &restart) {
				return reexec(log, restart.exe)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file (TOML); default: the embedded default")
	return cmd
}

func load(path string) (*spec.Spec, config.Warnings, error) {
	if path == "" {
		return config.Parse(config.Default(), "default")
	}
	return config.Load(path)
}

// logWarnings logs what the configuration asks for that has no effect.
func logWarnings(log *slog.Logger, warns config.Warnings) {
	for _, w := range warns {
		log.Warn("configuration warning: " + w.Error())
	}
}

// logStats logs the process's goroutines, heap, live flows, sessions and
// dials in progress (SIGUSR1),
// after a garbage collection so the heap figure is what is really held.
func logStats(log *slog.Logger, sv *supervisor.Supervisor) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	gen, proc := sv.Admission()
	var nofile syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	log.Info("runtime stats", "descriptor_limit", nofile.Cur, "goroutines", runtime.NumGoroutine(), "heap_inuse", m.HeapInuse, "heap_alloc", m.HeapAlloc, "flows", len(sv.Tracker().Flows()),
		"sessions", len(sv.Tracker().Sessions()), "dials_in_progress", sv.Tracker().DialsInProgress(),
		"dials_admitted", gen.InUse, "dials_waiting", gen.Waiting, "dial_limit", gen.Limit,
		"process_dials_admitted", proc.InUse, "process_dials_waiting", proc.Waiting, "process_dial_gate", proc.Limit)
}

// serveOptions are how serve runs besides the spec.
type serveOptions struct {
	level *slog.LevelVar // the process's log level, which the API may change
	// apiOptional: an API that cannot bind is a warning, not a failed
	// start (the embedded default's).
	apiOptional bool
	logs        *api.LogHub // the process's log records, for the API's /logs
	// reload applies a configuration from a path, a payload, or (both
	// empty) the file the process runs: the API's PUT /configs.
	reload func(path string, payload []byte) error
	// restart begins a restart: the API's POST /restart (restart.go).
	restart func() error
	// metrics are what the API's GET /metrics serves; nil without [api].
	metrics *metrics.Metrics
}

// startAPI serves [api] over sv; nil when the spec has none or, when
// optional, it could not bind.
func startAPI(s *spec.Spec, sv *supervisor.Supervisor, log *slog.Logger, o serveOptions) (*api.Server, error) {
	if s.API == nil {
		return nil, nil
	}
	opts := api.Options{
		Secret: s.API.Secret, ExternalUI: s.API.ExternalUI, AllowOrigins: s.API.AllowOrigins,
		Spec: s, Version: versionString(), LogLevel: o.level, Logger: log.With("component", "api"), Logs: o.logs,
		Reload: o.reload, Restart: o.restart,
	}
	if o.metrics != nil {
		opts.Metrics = o.metrics.Handler()
	}
	srv := api.New(sv, opts)
	if err := srv.Start(s.API.Listen); err != nil {
		srv.Close()
		if o.apiOptional {
			log.Warn("the API is not served", "error", err)
			return nil, nil
		}
		return nil, err
	}
	return srv, nil
}

// serve runs s until SIGINT or SIGTERM; SIGHUP re-reads the configuration
// with reload and applies it. A restart the API asks for stops it as
// SIGTERM does, then serve returns a restartError for its caller to
// execute the binary again (restart.go). The API starts before the
// supervisor's inbounds and stops before the supervisor; a reload does not
// move it (its listen, secret and origins are read at start).
func serve(s *spec.Spec, reload func() (*spec.Spec, config.Warnings, error), log *slog.Logger, o serveOptions) error {
	st := store.Open(s.State.Path, log.With("component", "store"))
	defer st.Close()
	if s.API != nil {
		o.metrics = metrics.New()
	}
	sv, err := supervisor.New(s, supervisor.Options{Logger: log, Store: st, Metrics: o.metrics})
	if err != nil {
		// Printed as the load errors are, one plain line on stderr.
		fmt.Fprintln(os.Stderr, "configuration invalid: "+err.Error())
		return exitError{1}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	// reloading serializes reloads (SIGHUP, the API's PUT /configs) and
	// guards apiSrv, which a reload the API asks for reads.
	var (
		reloading sync.Mutex
		apiSrv    *api.Server
	)
	// applyReload loads a configuration with load and applies it, as
	// SIGHUP does and as the API's PUT /configs asks; a refusal leaves the
	// running configuration serving and is the error returned.
	applyReload := func(load func() (*spec.Spec, config.Warnings, error)) error {
		reloading.Lock()
		defer reloading.Unlock()
		log.Info("reloading the configuration")
		next, warns, err := load()
		if err != nil {
			var errs config.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					log.Error("reload refused, the running configuration stays: " + e.Error())
				}
			} else {
				log.Error("reload refused, the running configuration stays: " + err.Error())
			}
			if o.metrics != nil {
				o.metrics.Reloaded(false) // an apply counts its own outcome
			}
			return err
		}
		logWarnings(log, warns)
		if err := sv.Apply(next); err != nil {
			return err
		}
		log.Info("reload applied")
		if apiSrv != nil {
			apiSrv.SetSpec(next)
			if !spec.Equal(next.API, s.API) {
				log.Warn("the [api] table changed: the API keeps its running settings until a restart")
			}
		}
		return nil
	}
	restarts := make(chan string, 1)
	o.restart = func() error { return requestRestart(restarts) }
	o.reload = func(path string, payload []byte) error {
		switch {
		case len(payload) > 0:
			return applyReload(func() (*spec.Spec, config.Warnings, error) { return config.Parse(payload, "PUT /configs payload") })
		case path != "":
			return applyReload(func() (*spec.Spec, config.Warnings, error) { return config.Load(path) })
		}
		return applyReload(reload)
	}
	// The API listens before the inbounds bind, so that it answers once
	// "switchyard ready" is logged; a reload it asks for meanwhile waits
	// for the start.
	reloading.Lock()
	started, err := startAPI(s, sv, log, o)
	if err != nil {
		reloading.Unlock()
		log.Error("start failed", "error", err)
		sv.Close()
		return exitError{1}
	}
	apiSrv = started
	err = sv.Start()
	reloading.Unlock()
	if err != nil {
		log.Error("start failed", "error", err)
		if started != nil {
			started.Close()
		}
		sv.Close()
		return exitError{1}
	}
	exe := waitStop(sigs, restarts, log, sv, func() { applyReload(reload) })
	if exe != "" {
		log.Info("restarting: stopping first")
	} else {
		log.Info("stopping")
	}
	done := make(chan struct{})
	go func() {
		if apiSrv != nil {
			apiSrv.Close()
		}
		sv.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		log.Warn("stopping took too long; exiting with flows still open")
	}
	if exe != "" {
		return restartError{exe}
	}
	return nil
}
