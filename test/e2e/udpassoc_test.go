package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

const assocConfig = `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
%s
`

// openAssociations opens n associations, each sending one datagram of size
// bytes to echo and reading its reply.
func openAssociations(t *testing.T, proxy string, echo *net.UDPConn, n, size int) []*socksclient.Assoc {
	t.Helper()
	payload := make([]byte, size)
	var as []*socksclient.Assoc
	t.Cleanup(func() {
		for _, a := range as {
			a.Close()
		}
	})
	for i := range n {
		a, err := socksclient.Associate(proxy)
		if err != nil {
			t.Fatalf("association %d: %v", i, err)
		}
		as = append(as, a)
		a.Send(echo.LocalAddr().String(), payload)
		if _, p, ok := a.Recv(5 * time.Second); !ok || len(p) != size {
			t.Fatalf("association %d: reply of %d bytes (%v), want %d", i, len(p), ok, size)
		}
	}
	return as
}

// waitGoroutines waits until the process runs at most n goroutines.
func (p *proc) waitGoroutines(n int) int {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, _ := p.stats()
		if g <= n || time.Now().After(deadline) {
			return g
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An idle association that was used (one datagram out over direct, one
// reply back) costs at most two goroutines: the inbound's reader of the
// client's datagrams and the direct sub-link's reader. They end with the
// control connections.
func TestIdleUDPAssociationGoroutines(t *testing.T) {
	const n = 100
	echo := udpEcho(t, "")
	p := start(t, fmt.Sprintf(assocConfig, ""))
	openAssociations(t, p.addr("socks-in"), echo, 1, 100) // starts the shared watcher
	base, _ := p.stats()
	as := openAssociations(t, p.addr("socks-in"), echo, n, 1200)
	g, _ := p.stats()
	if per := float64(g-base) / n; per > 2 {
		t.Fatalf("%.2f goroutines per idle association (%d with %d associations, %d before), want at most 2", per, g, n, base)
	}
	for _, a := range as {
		a.Close()
	}
	if g := p.waitGoroutines(base); g > base {
		t.Fatalf("%d goroutines 10 s after the associations closed, %d before", g, base)
	}
}

// Past max_udp_associations a UDP ASSOCIATE gets a general failure reply
// (0x01), logged at warn level; the associations already open go on.
func TestUDPAssociationCapRefusesWithGeneralFailure(t *testing.T) {
	echo := udpEcho(t, "")
	p := start(t, fmt.Sprintf(assocConfig, "max_udp_associations = 3"))
	as := openAssociations(t, p.addr("socks-in"), echo, 3, 10)
	_, err := socksclient.Associate(p.addr("socks-in"))
	var re socksclient.ReplyError
	if !errors.As(err, &re) || re.Code != 0x01 {
		t.Fatalf("a fourth association: %v, want a general failure reply", err)
	}
	p.waitLog("socks udp association refused", 1, 5*time.Second)
	as[0].Send(echo.LocalAddr().String(), []byte("still"))
	if _, b, ok := as[0].Recv(5 * time.Second); !ok || string(b) != "still" {
		t.Fatalf("an admitted association after the refusal: %q %v", b, ok)
	}
}

// startPlain is start with a binary built without the race detector, whose
// shadow memory would swamp what a memory test measures.
func startPlain(t *testing.T, config string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return startCmd(t, exec.Command(plainBinary(t), "run", "-c", path))
}

// rss returns the resident set of a process, in bytes.
func rss(t *testing.T, pid int) int { return int(procStatus(t, pid, "VmRSS")) << 10 }

// The memory of used, idle associations is bounded by what one is allowed
// to hold: 16 KiB of buffers, and two goroutines' stacks with the
// association's state, 64 KiB in all, however large the datagram each sent
// (buffers are pooled while a datagram is in flight, not held by a waiting
// reader). And it goes back once they close.
func TestUDPAssociationMemoryIsBoundedAndReturns(t *testing.T) {
	const (
		n        = 1200
		size     = 60000
		perAssoc = 64 << 10
		// The collector lets the heap grow to twice what is live before it
		// runs, and keeps what it freed for a while: 12 MiB covers that at
		// this size (it settles 6 to 8 MiB above the start), and the
		// buffers the pools hold in flight.
		headroom = 12 << 20
	)
	echo := udpEcho(t, "")
	p := startPlain(t, fmt.Sprintf(assocConfig, "max_udp_associations = 2000"))
	pid := p.cmd.Process.Pid
	openAssociations(t, p.addr("socks-in"), echo, 1, size)
	goroutines, _ := p.stats()
	base := rss(t, pid)
	as := openAssociations(t, p.addr("socks-in"), echo, n, size)
	time.Sleep(200 * time.Millisecond)
	held := rss(t, pid)
	t.Logf("RSS %d KiB before, %d KiB with %d idle associations (%d B each)", base>>10, held>>10, n, (held-base)/n)
	if bound := base + n*perAssoc + 2*headroom; held > bound {
		t.Fatalf("RSS %d KiB with %d associations, above %d KiB (%d KiB + %d × %d KiB + 2 × %d KiB)",
			held>>10, n, bound>>10, base>>10, n, perAssoc>>10, headroom>>10)
	}
	if held-base < 2*headroom {
		t.Fatalf("%d associations cost only %d KiB: too few to see them go", n, (held-base)>>10)
	}
	for _, a := range as {
		a.Close()
	}
	p.waitGoroutines(goroutines)
	// The collector runs when the program allocates: short associations
	// one at a time, as a client keeps making them, let it find what the
	// closed ones held and hand it back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := rss(t, pid)
		if now <= base+headroom {
			t.Logf("RSS %d KiB after they closed", now>>10)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RSS %d KiB 30 s after the associations closed: %d KiB before them, %d KiB with them", now>>10, base>>10, held>>10)
		}
		for _, a := range openAssociations(t, p.addr("socks-in"), echo, 20, 100) {
			a.Close()
		}
	}
}
