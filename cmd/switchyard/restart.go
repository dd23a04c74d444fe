package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"switchyard/supervisor"
)

// restartError is what serve returns after it stopped for a restart: the
// binary to execute again.
type restartError struct{ exe string }

func (e restartError) Error() string { return "restart " + e.exe }

// requestRestart begins a restart (the API's POST /restart, mihomo's
// restart): the binary is resolved now, so that one that is gone or not
// executable is the answer's error and the process keeps serving, and
// handed to the serve loop, which stops the process as on SIGTERM and
// returns it. Only the first request counts.
func requestRestart(restarts chan<- string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	const xOK = 1 // access(2)'s X_OK
	if err := syscall.Access(exe, xOK); err != nil {
		return fmt.Errorf("%s: %w", exe, err)
	}
	select {
	case restarts <- exe:
		return nil
	default:
		return errors.New("a restart is already under way")
	}
}

// waitStop serves signals until SIGINT, SIGTERM or a restart request:
// SIGHUP reloads, SIGUSR1 logs the runtime stats. It returns the binary to
// execute again after a restart request, "" after a signal to stop.
func waitStop(sigs <-chan os.Signal, restarts <-chan string, log *slog.Logger, sv *supervisor.Supervisor, reload func()) string {
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1:
				logStats(log, sv)
			case syscall.SIGHUP:
				reload()
			default:
				return ""
			}
		case exe := <-restarts:
			return exe
		}
	}
}

// reexec replaces the process, stopped already (its API, supervisor and
// store closed), with a new run of exe under the same arguments and
// environment, as mihomo's restart does: the pid, and the standard
// streams, stay. Every other descriptor the runtime opened is
// close-on-exec. When the exec fails the process exits non-zero, there
// being nothing left serving.
func reexec(log *slog.Logger, exe string) error {
	signal.Reset()
	log.Info("restarting", "executable", exe)
	err := syscall.Exec(exe, os.Args, os.Environ())
	log.Error("restart failed: the process has stopped", "executable", exe, "error", err)
	return exitError{1}
}
