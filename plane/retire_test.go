package plane_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
)

// gated blocks its dials until released and counts its Close.
type gated struct {
	entered chan struct{}
	release chan struct{}
	closes  atomic.Int32
}

func (g *gated) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	g.entered <- struct{}{}
	<-g.release
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (g *gated) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, errors.New("no")
}

func (g *gated) Close() error { g.closes.Add(1); return nil }

// A version retired while a dial runs on it is released only once that
// dial's flow ends; a dial that begins after the release fails with
// ErrRetired, which Reloaded recognises.
func TestARetiredVersionWaitsForItsDialsBeforeRelease(t *testing.T) {
	g := &gated{entered: make(chan struct{}), release: make(chan struct{})}
	tgt := plane.NewTarget(plane.OutboundID{Tag: "up", Version: 1}, g)
	done := make(chan net.Conn)
	go func() {
		c, err := tgt.DialStream(context.Background(), netx.Flow{})
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	<-g.entered
	tgt.Retire()
	if g.closes.Load() != 0 {
		t.Fatal("the outbound was released under a running dial")
	}
	close(g.release)
	c := <-done
	if c == nil {
		t.FailNow()
	}
	if g.closes.Load() != 0 {
		t.Fatal("the outbound was released under a live flow")
	}
	c.Close()
	if g.closes.Load() != 1 {
		t.Fatalf("closed %d times once idle, want 1", g.closes.Load())
	}
	_, err := tgt.DialStream(context.Background(), netx.Flow{})
	if !errors.Is(err, plane.ErrRetired) || !plane.Reloaded(err) {
		t.Fatalf("a dial on a released version: %v", err)
	}
	if plane.Reloaded(errors.New("refused")) {
		t.Fatal("any error counts as a reload")
	}
}

// A dial that completes after a drain with close closed its target's flows
// fails with ErrDrained, and its conn is closed.
func TestADialOvertakenByACloseDrainFails(t *testing.T) {
	g := &gated{entered: make(chan struct{}), release: make(chan struct{})}
	tgt := plane.NewTarget(plane.OutboundID{Tag: "up", Version: 1}, g)
	errc := make(chan error)
	go func() {
		_, err := tgt.DialStream(context.Background(), netx.Flow{})
		errc <- err
	}()
	<-g.entered
	tgt.CloseFlows()
	tgt.Retire()
	close(g.release)
	if err := <-errc; !errors.Is(err, plane.ErrDrained) {
		t.Fatalf("got %v", err)
	}
	if g.closes.Load() != 1 {
		t.Fatalf("closed %d times, want 1 once the dial ended", g.closes.Load())
	}
}
