package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

func reloadConfig(family, extraRule string) string {
	return fmt.Sprintf(`
[log]
level = "info"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "direct"
type = "direct"

[[outbounds]]
tag = "spare"
type = "direct"
address_family = %q
%s
`, family, extraRule)
}

// flowSet is n long-lived echo flows that each exchange a message on demand.
type flowSet struct {
	conns []net.Conn
}

func openFlows(t *testing.T, proxy, echo string, n int) *flowSet {
	t.Helper()
	fs := &flowSet{}
	for i := range n {
		c, err := socksclient.Dial(proxy, echo, "", "")
		if err != nil {
			t.Fatalf("flow %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		fs.conns = append(fs.conns, c)
	}
	return fs
}

// exchange makes every flow echo a message; it fails on any reset or loss.
func (fs *flowSet) exchange(round int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(fs.conns))
	for i, c := range fs.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("flow %d round %d", i, round)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte(msg)); err != nil {
				errs <- fmt.Errorf("flow %d: %w", i, err)
				return
			}
			b := make([]byte, len(msg))
			if _, err := io.ReadFull(c, b); err != nil || string(b) != msg {
				errs <- fmt.Errorf("flow %d: read %q: %v", i, b, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func TestReloadUnderLoad(t *testing.T) {
	echo := echoServer(t)
	other := echoServer(t)
	_, otherPort, _ := net.SplitHostPort(other)
	peer := udpEcho(t, "u:")
	p := start(t, reloadConfig("auto", ""))
	proxy := p.addr("socks-in")

	flows := openFlows(t, proxy, echo, 200)
	if err := flows.exchange(0); err != nil {
		t.Fatal(err)
	}
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Send(peer.LocalAddr().String(), []byte("before"))
	if _, _, ok := a.Recv(2 * time.Second); !ok {
		t.Fatal("no UDP reply before the reload")
	}

	// Keep bytes moving on every flow while the reload happens.
	stop := make(chan struct{})
	moving := make(chan error, 1)
	go func() {
		for round := 1; ; round++ {
			select {
			case <-stop:
				moving <- nil
				return
			default:
			}
			if err := flows.exchange(round); err != nil {
				moving <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	// An unrelated outbound changes and a rule is added.
	p.rewrite(reloadConfig("ipv4_only", fmt.Sprintf("\n[[rules]]\nport = [%s]\noutbound = \"block\"\n", otherPort)))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog("reload applied", 1, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	if err := <-moving; err != nil {
		t.Fatalf("a flow broke across the reload: %v", err)
	}
	if err := flows.exchange(-1); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	a.Send(peer.LocalAddr().String(), []byte("after"))
	if _, got, ok := a.Recv(2 * time.Second); !ok || string(got) != "u:after" {
		t.Fatalf("the UDP association after the reload: %q %v", got, ok)
	}
	// The next new flow follows the new rule.
	_, err = socksclient.Dial(proxy, other, "", "")
	var re socksclient.ReplyError
	if !errors.As(err, &re) || re.Code != 0x02 {
		t.Fatalf("a new flow after the reload ignored the added rule: %v", err)
	}
	if c, err := socksclient.Dial(proxy, echo, "", ""); err != nil {
		t.Fatalf("a new flow to an unaffected destination: %v", err)
	} else {
		c.Close()
	}
	p.waitLog("outbound spare@v2 built", 1, time.Second)
	p.waitLog("outbound direct@v1 reused", 1, time.Second)
}

func TestReloadSoak(t *testing.T) {
	echo := echoServer(t)
	p := start(t, reloadConfig("auto", ""))
	proxy := p.addr("socks-in")
	flows := openFlows(t, proxy, echo, 20)
	if err := flows.exchange(0); err != nil {
		t.Fatal(err)
	}
	// One round trip through both files first: it sets up what reloads
	// use once (the reload path, the parser's tables, the first build of
	// each shape), which is not growth. The soak's 50 reloads follow.
	configs := [2]string{reloadConfig("auto", ""), reloadConfig("ipv4_only", "\n[[rules]]\nport = [1]\noutbound = \"block\"\n")}
	for i, c := range []string{configs[1], configs[0]} {
		p.rewrite(c)
		p.cmd.Process.Signal(syscall.SIGHUP)
		p.waitLog("reload applied", i+1, 10*time.Second)
	}
	g0, h0 := p.settledStats()
	n := 50
	if v := os.Getenv("SOAK_RELOADS"); v != "" {
		fmt.Sscanf(v, "%d", &n)
	}
	for i := 1; i <= n; i++ {
		if i%25 == 0 && n > 50 {
			g, h := p.stats()
			t.Logf("after %d reloads: goroutines %d heap %d", i, g, h)
		}
		p.rewrite(configs[i%2])
		p.cmd.Process.Signal(syscall.SIGHUP)
		p.waitLog("reload applied", i+2, 10*time.Second)
		if err := flows.exchange(i); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	g1, h1 := p.settledStats()
	t.Logf("goroutines %d → %d, live heap %d → %d", g0, g1, h0, h1)
	if float64(g1) > 1.1*float64(g0) {
		t.Fatalf("goroutines grew from %d to %d over 50 reloads", g0, g1)
	}
	if float64(h1) > 1.1*float64(h0) {
		t.Fatalf("live heap grew from %d to %d over 50 reloads", h0, h1)
	}
}

// settledStats is the smallest of three samples: the heap figure after a
// collection still moves with the pools the runtime keeps.
func (p *proc) settledStats() (goroutines, heap int) {
	goroutines, heap = p.stats()
	for range 2 {
		g, h := p.stats()
		goroutines, heap = min(goroutines, g), min(heap, h)
	}
	return goroutines, heap
}
