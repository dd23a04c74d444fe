// Package netem runs the real switchyard binary against a real Xray server
// behind a delayed link (netlab: a network namespace made by the test,
// 50 ms each way) and measures what a user feels on a distant server.
// It needs root, iproute2 and, for netem itself, sch_netem in the kernel
// (netlab's user-space delay line takes over where the kernel has none).
package netem

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/test/internal/swproc"
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
	var dir string
	if bin, dir, err = swproc.Build("switchyard-netem"); err != nil {
		fmt.Fprintln(os.Stderr, err)
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
	logs := &swproc.LogBuf{}
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

// proc is one running switchyard (swproc.Proc); api is the API's
// address, when the config has one.
type proc struct {
	*swproc.Proc
	t    *testing.T
	logs *swproc.LogBuf
	api  string
}

// startSwitchyard runs `switchyard run -c` on config in the root namespace
// and waits for its ready line, which names the bound addresses. Its log
// is shown when the test fails.
func startSwitchyard(t *testing.T, config string) *proc {
	t.Helper()
	sp := swproc.Start(t, bin, config)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("switchyard logs:\n%s", sp.Logs)
		}
	})
	return &proc{Proc: sp, t: t, logs: sp.Logs}
}

func (p *proc) addr(tag string) string { return p.Addr(tag) }

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
