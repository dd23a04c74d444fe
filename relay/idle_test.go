package relay_test

import (
	"io"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/relay"
)

const idle = 200 * time.Millisecond

// How the relay's two conns look to it.
const (
	bothTCP  = iota // splice both ways
	neither         // userspace copies both ways
	onlyATCP        // userspace copies, a→b from a plain TCP source (as a proxy client's upload)
)

// pairs returns the relay's two conns and the peers at their far ends.
func pairs(t *testing.T, mode int) (a, b, client, server net.Conn) {
	client0, inbound := tcpPair(t)
	upstream, server0 := tcpPair(t)
	switch mode {
	case neither:
		return plainConn{inbound}, plainConn{upstream}, client0, server0
	case onlyATCP:
		return inbound, plainConn{upstream}, client0, server0
	}
	return inbound, upstream, client0, server0
}

var paths = []struct {
	name string
	mode int
}{{"splice", bothTCP}, {"userspace", neither}, {"userspace from tcp", onlyATCP}}

func TestASilentFlowEndsAfterTheIdleTime(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			a, b, _, _ := pairs(t, p.mode)
			start := time.Now()
			select {
			case <-relayed(a, b, idle):
			case <-time.After(3 * time.Second):
				t.Fatal("a silent flow did not end")
			}
			if d := time.Since(start); d < idle {
				t.Fatalf("the flow ended after %v, before the idle time", d)
			}
		})
	}
}

func TestATricklingFlowSurvives(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			a, b, client, server := pairs(t, p.mode)
			done := relayed(a, b, idle)
			got := readAll(server)
			for range 20 { // a byte every 50 ms for 1 s
				select {
				case res := <-done:
					t.Fatalf("the flow ended while bytes moved: %+v", res)
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := client.Write([]byte{'x'}); err != nil {
					t.Fatal(err)
				}
			}
			stopped := time.Now()
			res := wait(t, done, "the flow to end once the trickle stopped")
			if d := time.Since(stopped); d < idle-20*time.Millisecond {
				t.Fatalf("the flow ended %v after the last byte", d)
			}
			if res.AToB != 20 {
				t.Fatalf("relayed %d bytes, want 20", res.AToB)
			}
			if g := wait(t, got, "the far end"); len(g) != 20 {
				t.Fatalf("the far end got %d bytes", len(g))
			}
		})
	}
}

// After one side half-closes, the other direction gets a whole idle window of
// its own: an answer that comes later than an instant still goes through.
func TestAHalfClosedFlowWaitsForTheAnswer(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			a, b, client, server := pairs(t, p.mode)
			done := relayed(a, b, idle)
			serverGot := readAll(server)
			client.Write([]byte("question"))
			client.(*net.TCPConn).CloseWrite()
			if g := wait(t, serverGot, "the question"); string(g) != "question" {
				t.Fatalf("server got %q", g)
			}
			time.Sleep(idle / 2)
			clientGot := readAll(client)
			server.Write([]byte("answer"))
			server.(*net.TCPConn).CloseWrite()
			if g := wait(t, clientGot, "the answer"); string(g) != "answer" {
				t.Fatalf("client got %q", g)
			}
			if res := wait(t, done, "the relay"); res.BToA != 6 {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// A half-closed flow whose other direction stays silent ends after the idle
// time.
func TestAHalfClosedSilentFlowEnds(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			a, b, client, _ := pairs(t, p.mode)
			done := relayed(a, b, idle)
			client.(*net.TCPConn).CloseWrite()
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				t.Fatal("a half-closed silent flow did not end")
			}
		})
	}
}

// unsignalledConn stops nothing on CloseWrite and says the peer cannot be
// told (netx.ErrEndUnsignalled), as XHTTP's packet-up does.
type unsignalledConn struct{ *net.TCPConn }

func (unsignalledConn) CloseWrite() error { return netx.ErrEndUnsignalled }

// When the end of one direction cannot be told to the peer, the other
// direction goes on while bytes move and ends after the short idle window
// of an unsignalled end, not the flow's whole idle time: the peer would
// keep it open for as long as that.
func TestAnUnsignalledEndLeavesTheOtherDirectionAShortWindow(t *testing.T) {
	const short = 150 * time.Millisecond
	defer relay.SetUnsignalledIdle(short)()
	a, up, client, server := pairs(t, neither)
	done := relayed(a, unsignalledConn{up.(plainConn).TCPConn}, time.Minute)
	clientGot := readAll(client)
	client.Write([]byte("question"))
	client.(*net.TCPConn).CloseWrite()
	q := make([]byte, len("question"))
	if _, err := io.ReadFull(server, q); err != nil || string(q) != "question" {
		t.Fatalf("the server read %q: %v", q, err)
	}
	// The answer trickles for longer than the window: the flow goes on.
	for range 6 {
		time.Sleep(short / 2)
		if _, err := server.Write([]byte{'a'}); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	var res relay.Result
	select {
	case res = <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the flow did not end after the short window")
	}
	if d := time.Since(stopped); d < short-20*time.Millisecond {
		t.Fatalf("the flow ended %v after the last byte", d)
	}
	if g := wait(t, clientGot, "the answer"); string(g) != "aaaaaa" {
		t.Fatalf("the client got %q", g)
	}
	if res.BToA != 6 {
		t.Fatalf("result %+v", res)
	}
}
