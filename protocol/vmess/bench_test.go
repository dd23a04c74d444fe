package vmess_test

import (
	"bytes"
	"testing"

	"switchyard/netx"
	"switchyard/protocol/vmess"
	"switchyard/protocol/vmess/vmesstest"
)

// Codec benchmarks: one chunk per op, sealed by the client's Encoder or
// opened by its Decoder, with global padding asked for (the AEAD securities
// pad; the clear ones never do). Each reports allocations: the steady state
// of a flow allocates nothing, so every one shows 0 allocs/op.

// benchSizes are the stream payloads of one op: the largest padded sealed
// stream chunk (8 KiB less its length, tag and padding) and 1 KiB.
var benchSizes = []struct {
	name string
	size int
}{{"8KiB", 8110}, {"1KiB", 1024}}

// datagramSize is the payload of one UDP datagram in the benchmarks.
const datagramSize = 1400

func benchRequest(sec vmess.Security, cmd vmess.Command) vmess.Request {
	return vmess.Request{Command: cmd, Security: sec, GlobalPadding: true, Dst: netx.DomainAddr("example.com", 443)}
}

func BenchmarkSealChunk(b *testing.B) {
	for _, sec := range securities {
		for _, sz := range benchSizes {
			b.Run(sec.String()+"/"+sz.name, func(b *testing.B) {
				benchSeal(b, benchRequest(sec, vmess.CommandTCP), sz.size)
			})
		}
	}
}

func BenchmarkOpenChunk(b *testing.B) {
	for _, sec := range securities {
		for _, sz := range benchSizes {
			b.Run(sec.String()+"/"+sz.name, func(b *testing.B) {
				benchOpen(b, benchRequest(sec, vmess.CommandTCP), sz.size)
			})
		}
	}
}

func BenchmarkSealDatagram(b *testing.B) {
	for _, sec := range securities {
		b.Run(sec.String(), func(b *testing.B) {
			benchSeal(b, benchRequest(sec, vmess.CommandUDP), datagramSize)
		})
	}
}

func BenchmarkOpenDatagram(b *testing.B) {
	for _, sec := range securities {
		b.Run(sec.String(), func(b *testing.B) {
			benchOpen(b, benchRequest(sec, vmess.CommandUDP), datagramSize)
		})
	}
}

// benchSeal seals one chunk of size bytes per op into a staging buffer that
// is reused, as a flow's writer reuses its own.
func benchSeal(b *testing.B, req vmess.Request, size int) {
	s, _ := newSession(b, req)
	e := s.NewEncoder()
	payload := randomBytes(size)
	stage := make([]byte, 0, size+vmess.ChunkOverhead)
	seal := func() {
		out, err := e.Seal(stage[:0], payload)
		if err != nil || len(out) < size {
			b.Fatalf("sealed %d bytes: %v", len(out), err)
		}
	}
	for range 16 {
		seal()
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		seal()
	}
}

// opener opens, one op at a time, chunks a server sealed beforehand. The
// decoder opens chunks in place and each chunk's length mask and nonce
// follow from the ones before it, so the chunks are used once: after the
// last, the timer stops while a fresh decoder of the same session starts
// over on a fresh copy of the same bytes.
type opener struct {
	s      *vmess.Session
	d      *vmess.Decoder
	size   int    // the payload of one op
	wire   []byte // the response header and the chunks, as the server sent them
	work   []byte // the copy the decoder opens in place
	hdrEnd int    // the response header is wire[:hdrEnd]
	ends   []int  // op i opens wire[ends[i-1]:ends[i]] (from hdrEnd for op 0)
	i, off int
}

// benchWireBytes is about how much a server seals beforehand for one
// benchmark: enough ops that starting over is rare.
const benchWireBytes = 4 << 20

func newOpener(b *testing.B, req vmess.Request, size int) *opener {
	s, hdr := newSession(b, req)
	sreq, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		b.Fatal(err)
	}
	o := &opener{s: s, size: size}
	o.wire = sreq.AppendResponseHeader(nil, sreq.Check)
	o.hdrEnd = len(o.wire)
	body := sreq.ResponseBody()
	payload := randomBytes(size)
	for range max(64, benchWireBytes/size) {
		o.wire = body.AppendChunk(o.wire, payload)
		o.ends = append(o.ends, len(o.wire))
	}
	o.work = make([]byte, len(o.wire))
	o.restart(b)
	return o
}

// restart opens the response header with a fresh decoder; the next op opens
// the first chunk.
func (o *opener) restart(b *testing.B) {
	copy(o.work, o.wire)
	o.d = o.s.NewDecoder()
	if frame, _, err := o.d.Decode(o.work[:o.hdrEnd]); err != nil || frame != o.hdrEnd {
		b.Fatalf("response header: frame %d of %d, %v", frame, o.hdrEnd, err)
	}
	o.i, o.off = 0, o.hdrEnd
}

// next opens the next op's chunk: one Decode for a sealed chunk or a
// datagram, two for a clear stream's chunk (its length, then its payload).
func (o *opener) next(b *testing.B) {
	if o.i == len(o.ends) {
		b.StopTimer()
		o.restart(b)
		b.StartTimer()
	}
	end := o.ends[o.i]
	o.i++
	got := 0
	for o.off < end {
		frame, payload, err := o.d.Decode(o.work[o.off:end])
		if err != nil || frame <= 0 || frame > end-o.off {
			b.Fatalf("chunk %d: frame %d of %d, %v", o.i, frame, end-o.off, err)
		}
		o.off += frame
		got += len(payload)
	}
	if got != o.size {
		b.Fatalf("chunk %d: %d bytes of payload, want %d", o.i, got, o.size)
	}
}

func benchOpen(b *testing.B, req vmess.Request, size int) {
	o := newOpener(b, req, size)
	for range 16 {
		o.next(b)
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		o.next(b)
	}
}
