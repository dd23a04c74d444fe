package netlab

import (
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The link delays both ways: a TCP connect across it takes at least a
// round trip, and so does a request and its answer on an open connection.
// Only lower bounds: the link may not be faster than promised, and the
// machine may always be slower.
func TestPathDelaysEveryPacket(t *testing.T) {
	const delay = 40 * time.Millisecond
	p, err := New(delay)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("link: %s, %v each way", p.Mode, delay)
	target, err := p.StartTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()

	start := time.Now()
	c, err := net.DialTimeout("tcp", target.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connect := time.Since(start)
	start = time.Now()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	answer := time.Since(start)
	t.Logf("connect %v, request to first byte %v", connect, answer)
	for what, d := range map[string]time.Duration{"connect": connect, "request": answer} {
		if d < p.RTT()*9/10 {
			t.Errorf("%s took %v, under the %v round trip of the link", what, d, p.RTT())
		}
	}
	if target.Accepted() != 1 {
		t.Errorf("the target accepted %d connections, want 1", target.Accepted())
	}
}

// Nothing of a path is left after Close: neither the namespace nor the
// root namespace's device.
func TestPathCloseRemovesEverything(t *testing.T) {
	p, err := New(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(p.hostDev); err == nil {
		t.Errorf("device %s is still there", p.hostDev)
	}
	if err := run("ip", "netns", "exec", p.NS, "true"); err == nil {
		t.Errorf("namespace %s is still there", p.NS)
	}
}
