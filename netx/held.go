package netx

// Held is a copy of one datagram in a pooled buffer (GetBuf), with what its
// holder keeps beside it: where it goes, how it was routed.
type Held[M any] struct {
	bp   *[]byte
	n    int
	Meta M
}

// Payload is the datagram.
func (h Held[M]) Payload() []byte { return (*h.bp)[:h.n] }

// Release returns the datagram's buffer to its pool.
func (h Held[M]) Release() { PutBuf(h.bp) }

// HeldQueue holds datagrams that wait for something (a link to open, a
// name to resolve) in pooled buffers, up to a bound in packets and in
// buffer capacity. The zero value is empty; its holder guards it.
type HeldQueue[M any] struct {
	items []Held[M]
	bytes int // buffer capacity the items hold
}

// Push copies p onto the queue and reports whether it fit within
// maxPackets and maxBytes.
func (q *HeldQueue[M]) Push(p []byte, meta M, maxPackets, maxBytes int) bool {
	if len(p) > MaxBuf || len(q.items) >= maxPackets {
		return false
	}
	bp := GetBuf(len(p))
	if q.bytes+cap(*bp) > maxBytes {
		PutBuf(bp)
		return false
	}
	q.items = append(q.items, Held[M]{bp: bp, n: copy(*bp, p), Meta: meta})
	q.bytes += cap(*bp)
	return true
}

// Take empties the queue and returns what it held, in order.
func (q *HeldQueue[M]) Take() []Held[M] {
	items := q.items
	q.items, q.bytes = nil, 0
	return items
}

// Len is the number of datagrams held.
func (q *HeldQueue[M]) Len() int { return len(q.items) }
