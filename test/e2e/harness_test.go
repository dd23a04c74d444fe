// Package e2e starts the real switchyard binary with a config and drives it
// with real clients.
package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "switchyard")
	build := exec.Command("go", "build", "-race", "-o", bin, "switchyard/cmd/switchyard")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building switchyard:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running switchyard.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	logs  *logBuf
	addrs map[string]string // inbound tag -> bound address
	done  chan error
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

var readyAttr = regexp.MustCompile(`([\w.-]+)=(\S+)`)

// start writes config to a file and runs `switchyard run -c` on it, waiting
// for the ready line. Listen addresses may use port 0; the bound addresses
// come from the ready line.
func start(t *testing.T, config string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return startArgs(t, "run", "-c", path)
}

func startArgs(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(bin, args...))
}

// startCmd runs cmd, a command that runs switchyard, as startArgs does.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, logs: &logBuf{}, addrs: map[string]string{}, done: make(chan error, 1)}
	p.cmd = cmd
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if strings.Contains(line, "switchyard ready") {
				select {
				case ready <- line:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.done <- p.cmd.Wait()
	}()
	select {
	case line := <-ready:
		rest := line[strings.Index(line, "switchyard ready"):]
		for _, m := range readyAttr.FindAllStringSubmatch(rest, -1) {
			p.addrs[m[1]] = strings.Trim(m[2], `"`)
		}
	case err := <-p.done:
		t.Fatalf("switchyard exited before ready (%v):\n%s", err, p.logs)
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("switchyard not ready after 20s:\n%s", p.logs)
	}
	t.Cleanup(p.stop)
	return p
}

func (p *proc) addr(tag string) string {
	a, ok := p.addrs[tag]
	if !ok {
		p.t.Fatalf("no inbound %q in the ready line (%v)", tag, p.addrs)
	}
	return a
}

// stop sends SIGTERM and requires a clean exit within 5 s.
func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("switchyard exited with %v:\n%s", err, p.logs)
		}
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		p.t.Errorf("switchyard did not exit within 5s of SIGTERM:\n%s", p.logs)
	}
	if strings.Contains(p.logs.String(), "DATA RACE") {
		p.t.Errorf("race detected:\n%s", p.logs)
	}
}

// stopped waits for the process after a signal and returns how long it took.
func (p *proc) signal(sig os.Signal) (time.Duration, error) {
	start := time.Now()
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		return time.Since(start), err
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		return time.Since(start), fmt.Errorf("no exit after 10s")
	}
}

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
func (p *proc) waitLog(s string, n int, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for strings.Count(p.logs.String(), s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("no %d× %q in the log after %v:\n%s", n, s, d, p.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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
