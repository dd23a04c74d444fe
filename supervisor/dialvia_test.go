package supervisor

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// DialVia reaches addr through a group's leaf (a socks node to an
// upstream that goes direct), as a flow routed to that group would.
func TestDialViaAGroup(t *testing.T) {
	_, upstream := run(t, baseSpec(), Options{})
	s := baseSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "up", Type: "socks", Server: upstream, AddressFamily: "auto"})
	s.Groups = []spec.Group{{Tag: "pick", Policy: "selector", Members: []string{"up", "direct"}, Interrupt: true}}
	sv, _ := run(t, s, Options{})
	dst := tcpEcho(t)
	c, err := sv.DialVia(context.Background(), "pick", "tcp", dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := sv.DialVia(context.Background(), "nope", "tcp", dst); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := sv.DialVia(context.Background(), "pick", "udp", dst); !errors.Is(err, ErrNotStream) {
		t.Fatalf("udp: %v", err)
	}
	if _, err := sv.DialVia(context.Background(), "block", "tcp", dst); err == nil {
		t.Fatal("a dial through block succeeded")
	}
}

// A node whose server never answers fails DialVia by the establishment
// deadline.
func TestDialViaASilentNodeEndsByItsDeadline(t *testing.T) {
	silent, _ := countingListener(t, true)
	s := baseSpec()
	s.Dial.ConnectTimeout = 100 * time.Millisecond
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "silent", Type: "socks", Server: silent, AddressFamily: "auto"})
	sv, _ := run(t, s, Options{})
	start := time.Now()
	_, err := sv.DialVia(context.Background(), "silent", "tcp", "127.0.0.1:9")
	if err == nil {
		t.Fatal("a dial through a silent node succeeded")
	}
	limit := netx.EstablishTimeout(s.Dial.ConnectTimeout)
	if el := time.Since(start); el > limit+2*time.Second {
		t.Fatalf("took %s, deadline %s", el, limit)
	}
}
