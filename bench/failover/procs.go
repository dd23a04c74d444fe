package main

import (
	"net"
	"os/exec"
	"strconv"
	"time"

	"switchyard/bench/internal/benchkit"
)

// proc is one process the harness started (benchkit.Proc): an upstream
// Xray or a router.
type proc struct {
	*benchkit.Proc
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startProc runs bin with args as benchkit.StartProc does.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	bp, err := benchkit.StartProc(name, logPath, exec.Command(bin, args...))
	if err != nil {
		return nil, err
	}
	return &proc{Proc: bp, name: bp.Name, log: bp.Log, cmd: bp.Cmd, done: bp.Done}, nil
}

func (p *proc) alive() bool { return p.Alive() }
func (p *proc) kill()       { p.Kill() }
func (p *proc) stop()       { p.Stop() }

func (p *proc) waitListening(addr string, timeout time.Duration) error {
	return p.WaitListening(addr, timeout)
}

func freePort() (int, error) { return benchkit.FreePort() }

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
