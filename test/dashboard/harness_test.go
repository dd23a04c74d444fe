// Package dashboard runs the real switchyard binary with its API serving a
// built metacubexd, opens the dashboard in headless Chromium and asserts
// from the rendered page.
package dashboard

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/test/internal/swproc"
)

var bin string

func TestMain(m *testing.M) {
	var dir string
	var err error
	if bin, dir, err = swproc.Build("switchyard-dashboard"); err != nil {
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

// proc is one running switchyard (swproc.Proc).
type proc struct {
	*swproc.Proc
	t    *testing.T
	logs *swproc.LogBuf
	done chan error
}

// start writes config to a file and runs `switchyard run -c` on it, waiting
// (20 s at most) for the ready line, whose fields give the bound addresses.
// The process is stopped, and required to exit cleanly, at the test's end.
func start(t *testing.T, config string) *proc {
	t.Helper()
	sp := swproc.Start(t, bin, config)
	return &proc{Proc: sp, t: t, logs: sp.Logs, done: sp.Done}
}

func (p *proc) addr(tag string) string { return p.Addr(tag) }

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
func (p *proc) waitLog(s string, d time.Duration) { p.t.Helper(); p.WaitLog(s, 1, d) }

// waitLogN waits (d at most) until the process has logged n lines holding s.
func (p *proc) waitLogN(s string, n int, d time.Duration) { p.t.Helper(); p.WaitLog(s, n, d) }
