// Package e2e starts the real switchyard binary with a config and drives it
// with real clients.
package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/test/internal/swproc"
)

var bin string

func TestMain(m *testing.M) {
	var dir string
	var err error
	if bin, dir, err = swproc.Build("switchyard-e2e"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running switchyard (swproc.Proc), with the fields and
// methods the tests use under their short names.
type proc struct {
	*swproc.Proc
	t    *testing.T
	cmd  *exec.Cmd
	logs *swproc.LogBuf
	done chan error
}

func wrap(t *testing.T, sp *swproc.Proc) *proc {
	return &proc{Proc: sp, t: t, cmd: sp.Cmd, logs: sp.Logs, done: sp.Done}
}

// start writes config to a file and runs `switchyard run -c` on it, waiting
// for the ready line. Listen addresses may use port 0; the bound addresses
// come from the ready line.
func start(t *testing.T, config string) *proc {
	t.Helper()
	return wrap(t, swproc.Start(t, bin, config))
}

func startArgs(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(bin, args...))
}

// startCmd runs cmd, a command that runs switchyard, as startArgs does.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	return wrap(t, swproc.StartCmd(t, cmd))
}

func (p *proc) addr(tag string) string { return p.Addr(tag) }

// stop sends SIGTERM and requires a clean exit within 5 s.
func (p *proc) stop() { p.Stop() }

// signal sends sig and waits for the exit, returning how long it took.
func (p *proc) signal(sig os.Signal) (time.Duration, error) { return p.Signal(sig) }

// listenTCP returns a loopback listener and its address.
func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echoServer is a TCP echo server on loopback.
func echoServer(t *testing.T) string {
	ln := listenTCP(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// udpEcho answers every datagram with prefix+payload from its own address.
func udpEcho(t *testing.T, prefix string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(prefix), b[:n]...), from)
		}
	}()
	return c
}

// waitLog waits until the log holds at least n lines containing s.
func (p *proc) waitLog(s string, n int, d time.Duration) { p.t.Helper(); p.WaitLog(s, n, d) }

// stats asks the process for its runtime figures (SIGUSR1) and returns the
// goroutine count and the heap in use.
func (p *proc) stats() (goroutines, heap int) {
	p.t.Helper()
	n := strings.Count(p.logs.String(), "runtime stats")
	p.cmd.Process.Signal(syscall.SIGUSR1)
	p.waitLog("runtime stats", n+1, 5*time.Second)
	lines := strings.Split(p.logs.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "runtime stats") {
			fmt.Sscanf(field(lines[i], "goroutines"), "%d", &goroutines)
			fmt.Sscanf(field(lines[i], "heap_alloc"), "%d", &heap)
			return
		}
	}
	return
}

func field(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	rest := line[i+len(key)+2:]
	if j := strings.IndexByte(rest, ' '); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// rewrite replaces the config file of a process started with start.
func (p *proc) rewrite(config string) {
	p.t.Helper()
	if err := os.WriteFile(p.cmd.Args[len(p.cmd.Args)-1], []byte(config), 0o600); err != nil {
		p.t.Fatal(err)
	}
}
