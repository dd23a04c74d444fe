package benchkit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is one process a harness started: a router under test, an anchor,
// an upstream server. The harness is its parent, so a kill is followed by
// the wait that reaps it, and Done closes when the process is gone.
type Proc struct {
	Name string
	Log  string // the file its output goes to
	Cmd  *exec.Cmd
	Done chan struct{}
}

// StartProc runs cmd, its output appended to logPath, with no environment
// but PATH and HOME (no GOMAXPROCS, GOGC, GOMEMLIMIT or GODEBUG tunes one
// process and not another).
func StartProc(name, logPath string, cmd *exec.Cmd) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logPath, Cmd: cmd, Done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.Done)
	}()
	return p, nil
}

// Alive reports whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.Done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and returns once the process is reaped.
func (p *Proc) Kill() {
	if p.Alive() {
		p.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.Done
}

// Stop asks the process to exit (SIGTERM) and kills it after 5 s.
func (p *Proc) Stop() {
	if !p.Alive() {
		return
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(5 * time.Second):
		p.Kill()
	}
}

// WaitListening waits (within at most) until something accepts TCP on
// addr while the process runs.
func (p *Proc) WaitListening(addr string, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		if !p.Alive() {
			return fmt.Errorf("%s exited (log: %s)", p.Name, p.Log)
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s does not listen on %s (log: %s): %w", p.Name, addr, p.Log, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreePort returns a loopback TCP port nothing listened on a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address")
	}
	return a.Port, nil
}
