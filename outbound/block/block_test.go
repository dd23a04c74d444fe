package block

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

func TestStreamIsRefusedByRule(t *testing.T) {
	_, err := New().DialStream(context.Background(), netx.Flow{})
	if !errors.Is(err, outbound.ErrBlocked) {
		t.Fatalf("err = %v", err)
	}
}

func TestLinkSwallowsUntilClosed(t *testing.T) {
	o := New()
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	if err := l.WritePacket(make([]byte, 1500), netx.DomainAddr("x.test", 1)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, _, err := l.ReadPacket(make([]byte, 10)); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("read returned early: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.Close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := l.WritePacket([]byte("x"), netx.Addr{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// WaitPacket blocks until Close and then fails with net.ErrClosed.
func TestLinkWaitPacket(t *testing.T) {
	l := &Link{closed: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { _, err := l.WaitPacket(); errc <- err }()
	select {
	case err := <-errc:
		t.Fatalf("WaitPacket returned %v before Close", err)
	case <-time.After(20 * time.Millisecond):
	}
	l.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}
}
