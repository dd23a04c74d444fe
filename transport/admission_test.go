package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// A gRPC stream on a connection already up is a logical open: it passes a
// full admission gate, while a dial that needs a new connection waits for
// the gate within its deadline.
func TestStreamsOnAnEstablishedGRPCConnectionPassAFullGate(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	o := grpcOutbound(p, srv.addr, spec.Transport{ServiceName: "s"})
	d := newDialer(t, o)
	adm := netx.NewAdmission(netx.NewGate(8), 1)

	// The first dial brings the connection up under a permit.
	e, ctx, cancel := netx.Begin(context.Background(), adm, 5*time.Second)
	first, err := d.Dial(ctx)
	e.End()
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	// Another establishment holds the only permit.
	holder, hctx, hcancel := netx.Begin(context.Background(), adm, time.Minute)
	defer hcancel()
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	defer holder.End()

	e, ctx, cancel = netx.Begin(context.Background(), adm, 2*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	e.End()
	if err != nil {
		t.Fatalf("a stream on the live connection waited for the full gate: %v", err)
	}
	defer c.Close()
	echoRoundTrip(t, c, 1, 100)
	if s := adm.Stats(); s.InUse != 1 || s.Waiting != 0 {
		t.Fatalf("admission %+v after a logical open", s)
	}

	// A dialer without a connection needs a physical one: it waits.
	fresh := newDialer(t, o)
	e, ctx, cancel = netx.Begin(context.Background(), adm, 200*time.Millisecond)
	defer cancel()
	_, err = fresh.Dial(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || e.Phase() != netx.PhaseAdmission {
		t.Fatalf("a new connection past a full gate: %v (phase %v)", err, e.Phase())
	}
}
