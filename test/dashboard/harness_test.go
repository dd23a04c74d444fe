// Package dashboard runs the real switchyard binary with its API serving a
// built metacubexd, opens the dashboard in headless Chromium and asserts
// from the rendered page.
package dashboard

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

	"go.uber.org/goleak"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-dashboard")
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
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
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
// (20 s at most) for the ready line, whose fields give the bound addresses.
// The process is stopped, and required to exit cleanly, at the test's end.
func start(t *testing.T, config string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, logs: &logBuf{}, addrs: map[string]string{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "run", "-c", path)
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
		<-p.done
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
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("switchyard exited with %v:\n%s", err, p.logs)
		}
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("switchyard did not exit within 5s of SIGTERM:\n%s", p.logs)
	}
	if strings.Contains(p.logs.String(), "DATA RACE") {
		p.t.Errorf("race detected:\n%s", p.logs)
	}
}

// freeLoopbackPort is a loopback TCP port nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitLog waits (d at most) until the process has logged a line holding s.
func (p *proc) waitLog(s string, d time.Duration) { p.t.Helper(); p.waitLogN(s, 1, d) }

// waitLogN waits (d at most) until the process has logged n lines holding s.
func (p *proc) waitLogN(s string, n int, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for strings.Count(p.logs.String(), s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("not %d× %q in the log after %v:\n%s", n, s, d, p.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
