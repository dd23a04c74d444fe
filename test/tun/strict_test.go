package tun_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The strict tests give the client's namespace what a real machine has:
// an ordinary route to the servers in main, which any socket that escapes
// auto_route's table takes. The servers listen on port 8081, which the
// lab's rules block: whatever connection such a server accepts went
// around switchyard.

// bypassRoute routes the servers' range in main, via the veth.
func (l *lab) bypassRoute(t *testing.T) {
	t.Helper()
	dst := l.web[:strings.LastIndexByte(l.web, '.')] + ".0/24"
	if err := run("ip", "-n", l.client, "route", "add", dst, "via", l.hostS); err != nil {
		t.Fatal(err)
	}
}

// leakCounter accepts on addr in the servers' namespace and counts the
// connections: each one a leak.
func (l *lab) leakCounter(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	var ln net.Listener
	if err := in(l.server, func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return n
}

// settled is the count once the server has accepted what was connected:
// a client's connect returns before the server's Accept does.
func settled(n *atomic.Int64) int64 {
	time.Sleep(300 * time.Millisecond)
	return n.Load()
}

// dialBound dials addr from the client's namespace with an unmarked socket
// bound to the outside interface's address, as an application that
// means to go around a TUN does. (A socket bound to the interface itself,
// SO_BINDTODEVICE, is beyond policy routing: the kernel sends it on
// link whatever the rules say, and switchyard's own sockets bound to the
// outgoing interface rely on that.)
func (l *lab) dialBound(addr string, timeout time.Duration) error {
	return in(l.client, func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(l.hostC)}}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// dialPlain dials addr from the client's namespace with a plain unmarked
// socket.
func (l *lab) dialPlain(addr string, timeout time.Duration) error {
	return in(l.client, func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close() // a leak is counted where the server accepts
		}
		return err
	})
}

// strictConfig is the lab's configuration with strict_route.
func (l *lab) strictConfig(extra string) string {
	return l.config("strict_route = true\n" + extra)
}

// An application bound to the outside interface's address, probing the
// servers while the device's routes are missing (the device goes down,
// and the kernel drops its routes from auto_route's table): without
// strict_route it goes around the TUN through main (the lab proves its
// probe); with it, it gets unreachable. The strict rules are installed
// while running and gone after SIGTERM.
func TestStrictRouteBlocksTheBypass(t *testing.T) {
	l := newLab(t)
	l.bypassRoute(t)
	leaks := l.leakCounter(t, l.web+":8081")
	path := filepath.Join(t.TempDir(), "sy.toml")
	down := func() {
		t.Helper()
		if err := run("ip", "-n", l.client, "link", "set", "sytun0", "down"); err != nil {
			t.Fatal(err)
		}
	}

	sw := l.start(t, path, l.config(""))
	if err := l.dialBound(l.web+":8081", time.Second); settled(leaks) != 0 {
		t.Fatalf("a bound socket reached a blocked port with the device up (%v)", err)
	}
	down()
	if err := l.dialBound(l.web+":8081", time.Second); err != nil || settled(leaks) != 1 {
		t.Fatalf("without strict_route a bound socket did not go around the downed TUN (%v, %d leaks): the probe proves nothing", err, leaks.Load())
	}
	if _, err := sw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	leaks.Store(0)

	sw = l.start(t, path, l.strictConfig(""))
	running := l.installed(t)
	for _, want := range []string{
		"9000:\tnot from all fwmark " + swMark + " lookup 2022",
		"9001:\tfrom all to 172.19.0.0/30 lookup main",
		"9002:\tnot from all fwmark " + swMark + " unreachable",
		"default dev sytun0",
	} {
		if !strings.Contains(running, want) {
			t.Fatalf("no %q among the installed entries:\n%s", want, running)
		}
	}
	// Switchyard's own traffic still goes: the TUN carries the web server.
	l.webServer(t, l.web+":80")
	if out, err := l.curl("http://" + l.web + "/"); err != nil || out != l.web+":80" {
		t.Fatalf("curl through the strict TUN: %q %v\n%s", out, err, sw.Logs)
	}
	if err := l.dialBound(l.web+":8081", time.Second); settled(leaks) != 0 {
		t.Fatalf("a bound socket reached a blocked port with the device up (%v)", err)
	}
	down()
	err := l.dialBound(l.web+":8081", time.Second)
	if err == nil || settled(leaks) != 0 {
		t.Fatalf("with strict_route a bound socket reached the servers (%v, %d leaks)", err, leaks.Load())
	}
	if !errors.Is(err, unix.ENETUNREACH) {
		t.Fatalf("the bound socket failed otherwise than unreachable: %v", err)
	}
	if _, err := sw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := l.installed(t); got != "" {
		t.Fatalf("entries left after SIGTERM:\n%s", got)
	}
}

// After a SIGKILL the strict rules stay and keep blocking (the device and
// its routes are gone: without them traffic would take main); a restart
// finds them and installs its own in their place.
func TestStrictRouteAfterSIGKILL(t *testing.T) {
	l := newLab(t)
	l.bypassRoute(t)
	leaks := l.leakCounter(t, l.web+":8081")
	path := filepath.Join(t.TempDir(), "sy.toml")

	sw := l.start(t, path, l.strictConfig(""))
	running := l.installed(t)
	sw.Cmd.Process.Kill()
	<-sw.Done
	stale := l.installed(t)
	if !strings.Contains(stale, "9002:") || strings.Contains(stale, "sytun0") {
		t.Fatalf("after SIGKILL, want the strict rules without the device's routes:\n%s", stale)
	}
	if err := l.dialPlain(l.web+":8081", time.Second); err == nil || settled(leaks) != 0 {
		t.Fatalf("after SIGKILL an application reached the servers (%v, %d leaks)", err, leaks.Load())
	}

	sw = l.start(t, path, l.strictConfig(""))
	if got := l.installed(t); got != running {
		t.Fatalf("after a crash and a restart:\n%s\nwant\n%s", got, running)
	}
	if rules, _ := exec.Command("ip", "-n", l.client, "-4", "rule", "show").CombinedOutput(); strings.Count(string(rules), "9002:") != 1 {
		t.Fatalf("the restart duplicated the strict rule:\n%s", rules)
	}
	if _, err := sw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := l.installed(t); got != "" {
		t.Fatalf("entries left after SIGTERM:\n%s", got)
	}
}

// A reload that recreates the device (a new MTU) leaks nothing: plain and
// bound sockets probe the servers in a loop throughout. Without
// strict_route the same reloads let probes through main while the device
// is missing (the lab proves its probe).
func TestStrictRouteReloadLeaksNothing(t *testing.T) {
	l := newLab(t)
	l.bypassRoute(t)
	leaks := l.leakCounter(t, l.web+":8081")
	path := filepath.Join(t.TempDir(), "sy.toml")
	for _, strict := range []bool{false, true} {
		conf := l.config("")
		if strict {
			conf = l.strictConfig("")
		}
		leaks.Store(0)
		sw := l.start(t, path, conf)
		idx := l.linkIndex()
		probes := l.probeDuring(func() {
			// Five reloads; without strict_route more (up to 20) until a
			// probe has gone around, so that a loaded machine whose probes
			// missed the gaps does not fail the proof.
			for n := 1; n <= 5 || !strict && leaks.Load() == 0 && n <= 20; n++ {
				mtu := []string{"1400", "1500", "1300", "1450", "1350"}[(n-1)%5]
				os.WriteFile(path, []byte(strings.Replace(conf, "mtu = 1500", "mtu = "+mtu, 1)), 0o600)
				sw.Cmd.Process.Signal(syscall.SIGHUP)
				sw.WaitLog("reload applied", n, 10*time.Second)
			}
		})
		if got := l.linkIndex(); got == idx || got == 0 {
			t.Fatalf("the reloads did not recreate the device (index %d, was %d)\n%s", got, idx, sw.Logs)
		}
		t.Logf("strict_route %v: %d of %d probes reached the servers", strict, leaks.Load(), probes)
		if !strict {
			if leaks.Load() == 0 {
				t.Fatalf("without strict_route no probe went around the TUN during %d probes: the probe proves nothing", probes)
			}
			if _, err := sw.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if n := leaks.Load(); n != 0 {
			t.Fatalf("%d of %d probes reached the servers around the TUN during the reloads", n, probes)
		}
		if probes < 16 {
			t.Fatalf("only %d probes ran", probes)
		}
		if got := l.installed(t); !strings.Contains(got, "9002:") || !strings.Contains(got, "default dev sytun0") {
			t.Fatalf("after the reloads:\n%s", got)
		}
	}
}

// probeDuring probes the servers' blocked port in a loop from plain and
// bound sockets while fn runs, and returns how many probes ran.
func (l *lab) probeDuring(fn func()) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var probes atomic.Int64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// A short timeout: a leak connects at once, and a probe
				// stuck on the moment before keeps no others from running.
				if i%2 == 0 {
					l.dialPlain(l.web+":8081", 100*time.Millisecond)
				} else {
					l.dialBound(l.web+":8081", 100*time.Millisecond)
				}
				probes.Add(1)
			}
		}()
	}
	fn()
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the servers' last accepts
	return probes.Load()
}
