package socks

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// Past max_udp_associations a UDP ASSOCIATE gets a general failure reply
// and the refusal is logged at warn level, once per interval; once an
// association ends, a new one is served again.
func TestUDPAssociationCap(t *testing.T) {
	var logs syncBuffer
	conn := inboundtest.NewConnector(t)
	srv := New(Config{Tag: "capped", UDP: true, MaxUDPAssociations: 2}, conn,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	proxy := inboundtest.Serve(t, srv)

	first, _, _ := associateClient(t, proxy)
	associateClient(t, proxy)
	for range 3 {
		c := dial(t, proxy, "", "")
		if code, _ := request(t, c, socks5.CmdUDPAssociate, netx.Addr{}); code != socks5.ReplyGeneralFailure {
			t.Fatalf("association past the cap: reply %#x, want general failure", code)
		}
		closedByPeer(t, c)
	}
	if n := strings.Count(logs.String(), "socks udp association refused"); n != 1 {
		t.Fatalf("%d refusal lines for 3 refusals within the interval, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "max_udp_associations=2") {
		t.Fatalf("the refusal does not name the limit:\n%s", logs.String())
	}

	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dial(t, proxy, "", "")
		code, _ := request(t, c, socks5.CmdUDPAssociate, netx.Addr{})
		if code == socks5.ReplySucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no association served after one of two ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pushConnector opens links that answer every datagram at once with its
// copy, pushed to the association (netx.PacketPusher), and start no
// goroutine: what an idle association costs is then the inbound's share.
type pushConnector struct{ inboundtest.Connector }

func (c *pushConnector) ConnectStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, net.ErrClosed
}

func (c *pushConnector) OpenAssociation(netx.Flow) netx.PacketLink { return &pushLink{} }

type pushLink struct {
	mu      sync.Mutex
	deliver func([]byte, netx.Addr)
}

func (l *pushLink) PushPackets(d func([]byte, netx.Addr)) { l.deliver = d }
func (l *pushLink) WritePacket(p []byte, to netx.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deliver != nil {
		l.deliver(p, to)
	}
	return nil
}
func (l *pushLink) ReadPacket([]byte) (int, netx.Addr, error) { return 0, netx.Addr{}, net.ErrClosed }
func (l *pushLink) Close() error {
	l.mu.Lock()
	l.deliver = nil
	l.mu.Unlock()
	return nil
}

// An idle association, once used, costs the inbound one goroutine (its
// handler, which reads the client's datagrams): the control connection is
// watched by the server's one hang-up watcher and replies are pushed by the
// link. Closing the control connections ends them all.
func TestIdleAssociationGoroutines(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared hang-up watcher is Linux's")
	}
	const n = 50
	srv := New(Config{UDP: true}, &pushConnector{}, nil)
	proxy := inboundtest.Serve(t, srv)
	dst := netx.DomainAddr("peer.example", 7)
	pkt := socks5.AppendUDP(nil, dst, bytes.Repeat([]byte("d"), 30000))
	// One association first, so the watcher's goroutine is counted out.
	associateClient(t, proxy)
	before := runtime.NumGoroutine()
	var ctrls []net.Conn
	for range n {
		ctrl, relay, udp := associateClient(t, proxy)
		ctrls = append(ctrls, ctrl)
		if _, err := udp.WriteToUDPAddrPort(pkt, relay); err != nil {
			t.Fatal(err)
		}
		udp.SetReadDeadline(time.Now().Add(5 * time.Second))
		if m, err := udp.Read(make([]byte, 40000)); err != nil || m != len(pkt) {
			t.Fatalf("echo: %d bytes, %v", m, err)
		}
	}
	// A goroutine that is ending (a handshake's, a timer's) may still be
	// counted for a moment, and the process may start one of its own once
	// (slack): the idle count is the one that settles, per association.
	const slack = 2
	per := float64(runtime.NumGoroutine()-before-slack) / n
	for end := time.Now().Add(2 * time.Second); per > 1 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		per = float64(runtime.NumGoroutine()-before-slack) / n
	}
	if per > 1 {
		t.Fatalf("%.2f goroutines per idle association, want 1", per)
	}
	for _, c := range ctrls {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+slack {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the control connections closed, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
