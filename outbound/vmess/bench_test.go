package vmess

import (
	"bytes"
	"testing"

	protocol "switchyard/protocol/vmess"
)

// BenchmarkStreamReadWrite is a TCP flow's steady state: per op, one 32 KiB
// Write (sealed in chunks and written upstream) and the Reads that return
// 32 KiB of the server's answer (opened from 8 KiB chunks, as Xray's server
// sends them). MB/s counts both directions. The flow allocates nothing once
// its buffers have grown, so it shows 0 allocs/op.
func BenchmarkStreamReadWrite(b *testing.B) {
	for _, sec := range []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone, protocol.SecurityZero} {
		b.Run(sec.String(), func(b *testing.B) {
			f := newStreamBench(b, sec)
			for range 4 { // the flow's buffers grow to their full size
				f.op(b)
			}
			b.ReportAllocs()
			b.SetBytes(2 * streamBenchOp)
			b.ResetTimer()
			for b.Loop() {
				f.op(b)
			}
		})
	}
}

const (
	streamBenchOp    = 32 << 10 // written, and read, per op
	streamBenchChunk = 8 << 10  // the server's chunk payload
	streamBenchOps   = 64       // ops the server's answer lasts
)

// streamBench is a flow over a bytesConn that plays the server's answer and
// a discardConn that takes what the flow writes. The answer's chunks are
// opened in the flow's own buffer and follow one another (length masks,
// nonces), so after the last one the timer stops while the flow's reading
// side starts over with a fresh decoder of the same session on the same
// bytes; its buffers stay as they grew.
type streamBench struct {
	s       *protocol.Session
	c       *streamConn
	up      *bytesConn
	header  []byte // the response header
	answer  []byte // streamBenchOps ops of chunks
	payload []byte
	rbuf    []byte
	ops     int // ops read since the last restart
}

func newStreamBench(b *testing.B, sec protocol.Security) *streamBench {
	s, req := allocSession(b, sec, protocol.CommandTCP)
	f := &streamBench{s: s, payload: bytes.Repeat([]byte{0x5a}, streamBenchOp), rbuf: make([]byte, streamBenchOp)}
	f.header = req.AppendResponseHeader(nil, req.Check)
	body := req.ResponseBody()
	for range streamBenchOps * streamBenchOp / streamBenchChunk {
		f.answer = body.AppendChunk(f.answer, f.payload[:streamBenchChunk])
	}
	f.up = &bytesConn{}
	f.c = newStreamConn(f.up, s)
	f.c.Conn = discardConn{f.c.Conn}
	f.restart(b)
	return f
}

// restart opens the response header with a fresh decoder, as the flow's
// first Read would, and plays the answer from its first chunk.
func (f *streamBench) restart(b *testing.B) {
	d := f.s.NewDecoder()
	hdr := bytes.Clone(f.header)
	if frame, _, err := d.Decode(hdr); err != nil || frame != len(hdr) {
		b.Fatalf("response header: frame %d of %d, %v", frame, len(hdr), err)
	}
	rd := &f.c.rd
	rd.dec, rd.r, rd.w, rd.opened, rd.full, rd.err = d, 0, 0, true, false, nil
	f.c.pending = nil
	f.up.script = [][]byte{f.answer}
	f.ops = 0
}

func (f *streamBench) op(b *testing.B) {
	if f.ops == streamBenchOps {
		b.StopTimer()
		f.restart(b)
		b.StartTimer()
	}
	f.ops++
	if n, err := f.c.Write(f.payload); err != nil || n != len(f.payload) {
		b.Fatalf("wrote %d bytes: %v", n, err)
	}
	for got := 0; got < streamBenchOp; {
		n, err := f.c.Read(f.rbuf[:streamBenchOp-got])
		if err != nil {
			b.Fatalf("read %d bytes of %d: %v", got, streamBenchOp, err)
		}
		got += n
	}
}
