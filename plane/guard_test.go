package plane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/block"
	"switchyard/plane"
)

func TestClosingATargetsFlowsAbortsItsDatagramLinksAndWakesAWaitingReceive(t *testing.T) {
	tgt := plane.NewTarget(plane.OutboundID{Tag: "b", Version: 1}, block.New())
	l, err := tgt.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 16))
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	tgt.CloseFlows()
	select {
	case err := <-got:
		if !errors.Is(err, plane.ErrDrained) {
			t.Fatalf("waiting receive ended with %v, want %v", err, plane.ErrDrained)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a drained link did not wake its waiting receive")
	}
	if err := l.WritePacket([]byte("x"), netx.DomainAddr("a.test", 1)); !errors.Is(err, plane.ErrDrained) {
		t.Fatalf("send on a drained link: %v", err)
	}
	if _, err := tgt.DialPacket(context.Background(), netx.Flow{Network: netx.UDP}); !errors.Is(err, plane.ErrDrained) {
		t.Fatalf("a link opened on a closed target: %v", err)
	}
	if ErrText := plane.ErrDrained.Error(); ErrText != "the outbound this flow was opened on was drained" {
		t.Fatalf("drain text %q", ErrText)
	}
}

type closingOutbound struct {
	*block.Outbound
	closed chan struct{}
}

func (c closingOutbound) Close() error { close(c.closed); return nil }

func TestARetiredTargetReleasesItsOutboundAfterItsLastFlow(t *testing.T) {
	out := closingOutbound{block.New(), make(chan struct{})}
	tgt := plane.NewTarget(plane.OutboundID{Tag: "b", Version: 1}, out)
	l, err := tgt.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	tgt.Retire()
	select {
	case <-out.closed:
		t.Fatal("the outbound was released while a flow still ran on it")
	default:
	}
	l.Close()
	select {
	case <-out.closed:
	case <-time.After(time.Second):
		t.Fatal("the outbound was not released after its last flow")
	}
}
