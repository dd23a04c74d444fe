package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// proc is one process the harness started: an upstream Xray or a router.
// The harness is its parent, so a kill is followed by the wait that reaps
// it and the kill time is when the process is gone.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startProc runs bin with args, its output appended to logPath, with no
// environment but PATH and HOME (no GOMAXPROCS, GOGC, GOMEMLIMIT or
// GODEBUG tunes one process and not another).
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and returns once the process is reaped.
func (p *proc) kill() {
	if p.alive() {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop asks the process to exit (SIGTERM) and kills it after 5 s.
func (p *proc) stop() {
	if !p.alive() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.kill()
	}
}

// waitListening waits until p accepts TCP connections on addr.
func (p *proc) waitListening(addr string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		if !p.alive() {
			return fmt.Errorf("%s exited (log: %s)", p.name, p.log)
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s does not listen on %s (log: %s): %w", p.name, addr, p.log, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
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

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
