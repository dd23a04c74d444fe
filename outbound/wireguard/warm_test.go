package wireguard

import (
	"context"
	"testing"
	"time"

	"switchyard/outbound"
)

// Warm starts the tunnel without a flow; a second Warm and the first
// flow reuse it; Cool lets an unused tunnel go.
func TestWarmStartsTheTunnel(t *testing.T) {
	_, c := pair(t, "", nil)
	if w := c.Warmth(); w.Kind != outbound.WarmSession || w.Up {
		t.Fatalf("before: %+v", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if opened, err := c.Warm(ctx, true); err != nil || !opened {
		t.Fatalf("warm: %v %v\n%s", opened, err, c.logs)
	}
	st, _ := c.SlotState()
	if opened, err := c.Warm(ctx, true); err != nil || opened {
		t.Fatalf("a second warm opened again: %v %v", opened, err)
	}
	conn := dialTCP(t, c, "echo.test:7")
	echoOnce(t, conn, []byte("through the warm tunnel"))
	conn.Close()
	if now, _ := c.SlotState(); now.Gen != st.Gen || !c.Warmth().Up {
		t.Fatalf("the flow did not ride the warm tunnel: generation %d, then %d", st.Gen, now.Gen)
	}
	waitFor(t, "the flow's release", func() bool { s, _ := c.SlotState(); return s.Holds == 0 })
	c.Cool()
	waitFor(t, "the unused tunnel let go", func() bool { return !c.Warmth().Up })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
