package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"switchyard/api"
	"switchyard/config"
	"switchyard/metrics"
	"switchyard/remote"
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
			src, err := readSource(path)
			var s *spec.Spec
			var warns config.Warnings
			if err == nil {
				s, warns, err = src.lower()
			}
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
			err = serve(s, src, func() (source, error) { return readSource(path) }, log,
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
	src, err := readSource(path)
	if err != nil {
		return nil, nil, err
	}
	return src.lower()
}

// source is a configuration's text and where it is read as being from:
// what the process runs is kept as its source, so that a download applies
// over the configuration running (not over a file being edited since).
type source struct {
	data []byte
	name string // for error texts
	dir  string // relative paths are relative to it; "" for text from no file
}

// readSource reads the file at path; "" is the embedded default.
func readSource(path string) (source, error) {
	if path == "" {
		return source{data: config.Default(), name: "default"}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return source{}, fmt.Errorf("config: %w", err)
	}
	return source{data: data, name: path, dir: filepath.Dir(path)}, nil
}

func (src source) lower() (*spec.Spec, config.Warnings, error) {
	return config.ParseIn(src.data, src.name, src.dir)
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
	// downloads are the url providers' and rule sets' (provider.go).
	downloads *remote.Updater
	// reapply applies the running source again (the API's PUT of a file
	// provider or rule set).
	reapply func() error
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
	if o.downloads != nil {
		opts.Downloads = o.downloads
	}
	opts.Reapply = o.reapply
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

// serve runs s, lowered from src, until SIGINT or SIGTERM; SIGHUP reads
// the configuration again with reread and applies it. A restart the API
// asks for stops it as SIGTERM does, then serve returns a restartError for
// its caller to execute the binary again (restart.go). The API starts
// before the supervisor's inbounds and stops before the supervisor; a
// reload does not move it (its listen, secret and origins are read at
// start). The downloads of url providers and rule sets start once the
// supervisor runs and stop before it; a changed download re-applies the
// running source.
func serve(s *spec.Spec, src source, reread func() (source, error), log *slog.Logger, o serveOptions) error {
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
	// reloading serializes reloads (SIGHUP, the API's PUT /configs, a
	// download's apply) and guards apiSrv, which a reload the API asks for
	// reads, and running, the source in force.
	var (
		reloading sync.Mutex
		apiSrv    *api.Server
		running   = src
		downloads *remote.Updater
	)
	// applyReload reads a source with load, lowers it and applies it, as
	// SIGHUP does, as the API's PUT /configs asks and as a changed
	// download needs (why says which); a refusal leaves the running
	// configuration serving and is the error returned.
	applyReload := func(why string, load func() (source, error)) error {
		reloading.Lock()
		defer reloading.Unlock()
		log.Info(why)
		next, err := load()
		var warns config.Warnings
		var ns *spec.Spec
		if err == nil {
			ns, warns, err = next.lower()
		}
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
		if err := sv.Apply(ns); err != nil {
			return err
		}
		running = next
		log.Info("reload applied")
		if downloads != nil {
			downloads.Reconfigure(resources(ns))
		}
		if apiSrv != nil {
			apiSrv.SetSpec(ns)
			if !spec.Equal(ns.API, s.API) {
				log.Warn("the [api] table changed: the API keeps its running settings until a restart")
			}
		}
		return nil
	}
	reload := func() error { return applyReload("reloading the configuration", reread) }
	downloads = newDownloads(s, sv, log, func(r remote.Resource) error {
		return applyReload("applying the download of "+describe(r), func() (source, error) { return running, nil })
	})
	o.downloads = downloads
	o.reapply = func() error {
		return applyReload("reading the provider and rule-set files again", func() (source, error) { return running, nil })
	}
	restarts := make(chan string, 1)
	o.restart = func() error { return requestRestart(restarts) }
	o.reload = func(path string, payload []byte) error {
		switch {
		case len(payload) > 0:
			return applyReload("reloading the configuration", func() (source, error) {
				return source{data: payload, name: "PUT /configs payload"}, nil
			})
		case path != "":
			return applyReload("reloading the configuration", func() (source, error) { return readSource(path) })
		}
		return reload()
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
	if err == nil {
		downloads.Start()
	}
	reloading.Unlock()
	if err != nil {
		log.Error("start failed", "error", err)
		if started != nil {
			started.Close()
		}
		downloads.Close()
		sv.Close()
		return exitError{1}
	}
	exe := waitStop(sigs, restarts, log, sv, func() { reload() })
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
		downloads.Close()
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
