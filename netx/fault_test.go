package netx

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A dial that runs out of time waiting for its admission permit is this
// process's refusal; its error still matches the deadline.
func TestAdmissionTimeoutIsALocalRefusal(t *testing.T) {
	adm := NewAdmission(NewGate(1), 1)
	if err := adm.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer adm.Release()
	e, ctx, cancel := Begin(context.Background(), adm, 20*time.Millisecond)
	defer cancel()
	defer e.End()
	err := Admit(ctx)
	if f, _ := FaultOf(err); f != FaultLocalRefusal || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit: %v (fault %v)", err, f)
	}
	var de *DeadlineError
	if !errors.As(err, &de) {
		t.Fatalf("Admit: %v is not the establishment's deadline", err)
	}
}

// The outermost fault of a chain wins; the text is the wrapped error's.
func TestFaultOf(t *testing.T) {
	inner := WithEpisode(errors.New("gone"), FaultCarrier, 7)
	outer := fmt.Errorf("flow: %w", WithFault(inner, FaultRetired))
	if f, ep := FaultOf(outer); f != FaultRetired || ep != 0 {
		t.Fatalf("FaultOf(outer) = %v, %d", f, ep)
	}
	if f, ep := FaultOf(fmt.Errorf("x: %w", inner)); f != FaultCarrier || ep != 7 {
		t.Fatalf("FaultOf(inner) = %v, %d", f, ep)
	}
	if f, ep := FaultOf(errors.New("plain")); f != FaultNone || ep != 0 {
		t.Fatalf("FaultOf(plain) = %v, %d", f, ep)
	}
	if inner.Error() != "gone" || WithFault(nil, FaultFraming) != nil {
		t.Fatal("a fault changed the error")
	}
	if a, b := NewEpisode(), NewEpisode(); a == 0 || a == b {
		t.Fatalf("episodes %d, %d", a, b)
	}
}
