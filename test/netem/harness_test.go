// Package netem runs the real switchyard binary against a real Xray server
// behind a delayed link (netlab: a network namespace made by the test,
// 50 ms each way) and measures what a user feels on a distant server.
// It needs root, iproute2 and, for netem itself, sch_netem in the kernel
// (netlab's user-space delay line takes over where the kernel has none).
package netem

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/test/netem/netlab"
)

var (
	bin  string // the switchyard binary, built with the race detector
	xray string // the pinned Xray of scripts/peers.sh
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out, err := exec.Command(filepath.Join(root, "scripts", "peers.sh"), "path", "xray").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netem: locating xray: %v\n", err)
		os.Exit(1)
	}
	xray = strings.TrimSpace(string(out))
	if _, err := os.Stat(xray); err != nil {
		fmt.Fprintf(os.Stderr, "netem: xray is not installed (%v); run scripts/peers.sh install (the README's test command does)\n", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "switchyard-netem")
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

// newPath makes the delayed path for one test and removes it when the test
// ends, failed or not.
func newPath(t *testing.T, delay time.Duration) *netlab.Path {
	t.Helper()
	p, err := netlab.New(delay)
	if err != nil {
		t.Fatalf("making the delayed path: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("removing the delayed path: %v", err)
		}
	})
	return p
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startXray runs the Xray server inside the namespace and waits until both
// of its inbounds accept across the link.
func startXray(t *testing.T, p *netlab.Path) (certFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, err := netlab.WriteCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "xray.json")
	if err := os.WriteFile(cfg, []byte(netlab.XrayServer(p.PeerAddr, certFile, keyFile, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := p.Command(xray, "run", "-c", cfg)
	logs := &logBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // ip netns exec execs xray: this is its pid
		<-done
		if t.Failed() {
			t.Logf("xray logs:\n%s", logs)
		}
	})
	for _, port := range []int{netlab.VLESSPort, netlab.TrojanPort} {
		if err := netlab.WaitListening(fmt.Sprintf("%s:%d", p.PeerAddr, port), 15*time.Second); err != nil {
			t.Fatalf("xray in %s: %v\n%s", p.NS, err, logs)
		}
	}
	return certFile
}

// proc is one running switchyard.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	logs  *logBuf
	addrs map[string]string // inbound tag -> bound address
	api   string            // the API's address, when the config has one
	done  chan error
}

var readyAttr = regexp.MustCompile(`([\w.-]+)=(\S+)`)

// startSwitchyard runs `switchyard run -c` on config in the root namespace
// and waits for its ready line, which names the bound addresses.
func startSwitchyard(t *testing.T, config string) *proc {
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

// stop sends SIGTERM and requires a clean exit within 5 s and no race.
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
		<-p.done
		p.t.Errorf("switchyard did not exit within 5s of SIGTERM:\n%s", p.logs)
	}
	if strings.Contains(p.logs.String(), "DATA RACE") {
		p.t.Errorf("race detected:\n%s", p.logs)
	}
	if p.t.Failed() {
		p.t.Logf("switchyard logs:\n%s", p.logs)
	}
}

// warmOpened counts the warm attempts that opened a connection to node:
// warm-up's debug line per attempt.
func (p *proc) warmOpened(node string) int {
	n := 0
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(line, `msg="warm attempt"`) && strings.Contains(line, " node="+node+" ") && strings.Contains(line, " outcome=opened") {
			n++
		}
	}
	return n
}

// freePort returns a loopback TCP port nothing listens on, below the
// kernel's ephemeral range (32768 up), which the ":0" listeners and the
// outgoing connections of other test binaries draw from: the port is not
// taken by one of them before switchyard binds it.
func freePort(t *testing.T) int {
	t.Helper()
	for range 200 {
		port := 20000 + mrand.IntN(12768)
		ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatal("no free port")
	return 0
}

// check runs `switchyard check -c` on config and returns its output and
// whether it accepted the config.
func check(t *testing.T, config string) (string, bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "check.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", "-c", path).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running switchyard check: %v", err)
		}
		return string(out), false
	}
	return string(out), true
}
