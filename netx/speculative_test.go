package netx

import (
	"context"
	"testing"
)

type committed struct{ n int }

func (c *committed) Commit(context.Context) { c.n++ }

func TestSpeculativeMark(t *testing.T) {
	if Speculative(context.Background()) {
		t.Fatal("a plain context reads speculative")
	}
	ctx, cancel := context.WithCancel(WithSpeculative(context.Background()))
	defer cancel()
	if !Speculative(ctx) {
		t.Fatal("the mark does not carry to a derived context")
	}
	c := &committed{}
	Commit(ctx, c)
	Commit(ctx, struct{}{})
	if c.n != 1 {
		t.Fatalf("Commit called %d times", c.n)
	}
}
