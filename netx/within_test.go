package netx

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// A handshake stuck on the upstream ends when its context does, with the
// context's error; one that finished in time leaves no deadline behind.
func TestWithin(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		a, b := net.Pipe() // a write blocks until the other end reads
		defer a.Close()
		defer b.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		err := Within(ctx, a, func() error { _, err := a.Write([]byte("never read")); return err })
		if !errors.Is(err, context.Canceled) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := Within(ctx, a, func() error { _, err := a.Read(make([]byte, 1)); return err })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("done in time", func(t *testing.T) {
		c, d := net.Pipe()
		defer c.Close()
		defer d.Close()
		go d.Read(make([]byte, 1))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := Within(ctx, c, func() error { _, err := c.Write([]byte("x")); return err }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // past ctx's deadline
		go d.Read(make([]byte, 1))
		if _, err := c.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a failure of its own", func(t *testing.T) {
		c, d := net.Pipe()
		defer c.Close()
		defer d.Close()
		refused := errors.New("refused")
		if err := Within(context.Background(), c, func() error { return refused }); err != refused {
			t.Fatalf("%v", err)
		}
	})
}
