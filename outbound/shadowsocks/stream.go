package shadowsocks

import (
	"errors"
	"net"
	"sync"

	ss "switchyard/protocol/shadowsocks"
)

// stream is one TCP flow through the server: Write seals the upload in
// chunks staged in a pooled buffer, Read opens the download through the
// flow's read buffer. Read and Write may run at the same time; each is
// called by one goroutine at a time, as the relay does.
type stream struct {
	net.Conn // the transport to the server
	up       *ss.Sealer
	size     int // the method's BufSize
	down     *ss.Reader
	werr     error // sticky: a failed write leaves the chunk stream broken
}

// startBuf is the capacity the read buffer of a flow starts with (it grows
// to the method's BufSize once the flow moves more at a time, by ss.Reader's
// rule), and the staging buffer of a write that fits it. A flow that moves
// little holds little.
const startBuf = 4 << 10

// A write stages its sealed chunks in a buffer taken from the pool of its
// size for that write only: startBuf when the write fits it, else the
// method's BufSize. No flow holds a staging buffer between writes, and the
// pools hold only what writes gave back (sync.Pool, emptied by the garbage
// collector), so a write allocates nothing in steady state.
var stagePools = [...]struct {
	size int
	pool sync.Pool
}{{size: startBuf}, {size: ss.BufAEAD}, {size: ss.Buf2022}}

func init() {
	for i := range stagePools {
		size := stagePools[i].size
		stagePools[i].pool.New = func() any { b := make([]byte, 0, size); return &b }
	}
}

// stageSize is the staging buffer of a write of n bytes.
func (s *stream) stageSize(n int) int {
	if n+ss.RecordOverhead <= startBuf {
		return startBuf
	}
	return s.size
}

// getStage returns an empty buffer of capacity size from its pool.
func getStage(size int) *[]byte {
	for i := range stagePools {
		if stagePools[i].size == size {
			return stagePools[i].pool.Get().(*[]byte)
		}
	}
	b := make([]byte, 0, size) // no method has another size
	return &b
}

// putStage gives b back to the pool of its capacity.
func putStage(b *[]byte) {
	for i := range stagePools {
		if stagePools[i].size == cap(*b) {
			*b = (*b)[:0]
			stagePools[i].pool.Put(b)
			return
		}
	}
}

func (s *stream) Read(p []byte) (int, error) { return s.down.Read(p) }

// Write seals p into chunks and writes them; a write larger than the
// staging buffer goes out in several writes.
func (s *stream) Write(p []byte) (int, error) {
	if s.werr != nil {
		return 0, s.werr
	}
	stage := getStage(s.stageSize(len(p)))
	defer putStage(stage)
	done := 0
	for done < len(p) {
		out, n := s.up.Seal((*stage)[:0], p[done:])
		if _, err := s.Conn.Write(out); err != nil {
			s.werr = err
			return done, err
		}
		done += n
	}
	return done, nil
}

// CloseWrite ends the upload: every sealed chunk is already written, so it
// half-closes the transport.
func (s *stream) CloseWrite() error {
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
