package netx

import (
	"bytes"
	"testing"
)

// A held queue keeps copies in order, within its bound in packets and in
// buffer capacity, and Take empties it.
func TestHeldQueueBounds(t *testing.T) {
	var q HeldQueue[int]
	p := []byte("datagram")
	for i := range 3 {
		if !q.Push(p, i, 3, 1<<20) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Push(p, 3, 3, 1<<20) {
		t.Fatal("a push past the packet bound fit")
	}
	p[0] = 'D' // the queue holds copies
	got := q.Take()
	if len(got) != 3 || q.Len() != 0 {
		t.Fatalf("took %d, %d left", len(got), q.Len())
	}
	for i, h := range got {
		if h.Meta != i || !bytes.Equal(h.Payload(), []byte("datagram")) {
			t.Fatalf("item %d: %d %q", i, h.Meta, h.Payload())
		}
		h.Release()
	}
	small := cap(*GetBuf(len(p)))
	if !q.Push(p, 0, 10, small) || q.Push(p, 1, 10, small) {
		t.Fatal("the byte bound is not the buffers' capacity")
	}
	if q.Push(make([]byte, MaxBuf+1), 0, 10, 1<<30) {
		t.Fatal("a datagram larger than any buffer was held")
	}
	for _, h := range q.Take() {
		h.Release()
	}
}
