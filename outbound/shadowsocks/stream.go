package shadowsocks

import (
	"errors"
	"net"

	ss "switchyard/protocol/shadowsocks"
)

// stream is one TCP flow through the server: Write seals the upload in
// chunks staged in one buffer, Read opens the download through another.
// Read and Write may run at the same time; each is called by one goroutine
// at a time, as the relay does.
type stream struct {
	net.Conn // the transport to the server
	up       *ss.Sealer
	stage    []byte // one write of sealed chunks: startBuf, then size, of capacity
	size     int    // the method's BufSize
	down     *ss.Reader
	werr     error // sticky: a failed write leaves the chunk stream broken
}

// startBuf is the capacity each buffer of a flow starts with; a buffer grows
// to the method's BufSize once the flow moves more at a time (the reader's
// rule is on ss.Reader; the staging buffer grows at the first write that
// does not fit it). A flow that moves little holds little.
const startBuf = 4 << 10

func (s *stream) Read(p []byte) (int, error) { return s.down.Read(p) }

// Write seals p into chunks and writes them; a write larger than the
// staging buffer goes out in several writes.
func (s *stream) Write(p []byte) (int, error) {
	if s.werr != nil {
		return 0, s.werr
	}
	if cap(s.stage) < s.size && len(p)+ss.RecordOverhead > cap(s.stage) {
		s.stage = make([]byte, 0, s.size)
	}
	done := 0
	for done < len(p) {
		out, n := s.up.Seal(s.stage[:0], p[done:])
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
