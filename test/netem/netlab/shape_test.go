package netlab

import (
	"net"
	"testing"
	"time"
)

// Shape changes a running link: a larger delay lengthens the connect, a
// 100 % loss lets nothing through, and no loss lets it through again.
func TestShapeChangesDelayAndLoss(t *testing.T) {
	p, err := New(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target, err := p.StartTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	connect := func(timeout time.Duration) (time.Duration, error) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", target.Addr, timeout)
		if err != nil {
			return 0, err
		}
		c.Close()
		return time.Since(start), nil
	}
	if err := p.Shape(50*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := connect(5 * time.Second); err != nil || d < 90*time.Millisecond {
		t.Fatalf("connect over 50 ms each way: %v, %v", d, err)
	}
	if err := p.Shape(time.Millisecond, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(time.Second); err == nil {
		t.Fatal("a connect went through a 100 % loss")
	}
	if err := p.Shape(time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(5 * time.Second); err != nil {
		t.Fatalf("after the loss is lifted: %v", err)
	}
	if err := p.Shape(time.Millisecond, 101); err == nil {
		t.Fatal("a loss over 100 % was accepted")
	}
}
