// Package vlessecho is the far end of the load tests and benches that hold
// many flows open: a VLESS server over gRPC ("gun") on cleartext HTTP/2
// that answers each stream's VLESS header and echoes its payload. It is
// written apart from switchyard's own codecs, so that it checks them.
package vlessecho

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// Why this shape: a TCP flow holds a descriptor at each of its ends in
// every process it crosses; where the hard descriptor limit is 20,000 and
// cannot be raised, a router cannot hold 10,000 client sockets and 10,000
// upstream ones. So both routers send the flows out through the same
// VLESS outbound over gRPC ("gun") on cleartext HTTP/2, which carries every
// flow as a stream of a shared connection, to this server: it answers each
// stream's VLESS header and echoes its payload. A router then holds one
// descriptor per flow, and so does the harness.

// UUID is the VLESS user the server accepts; ServiceName the gRPC service
// name its path is made of (/load/Tun).
const (
	UUID        = "b831381d-6324-4d53-ad4f-8cda48b30811"
	ServiceName = "load"
)

// Server serves /load/Tun over h2c until Close.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Start serves on a loopback port, at most maxStreams streams on one
// connection.
func Start(maxStreams int) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	e := &Server{ln: ln, done: make(chan struct{}), srv: &http.Server{
		Handler:   http.HandlerFunc(serveVLESSEcho),
		Protocols: &protocols,
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
	}}
	go func() { defer close(e.done); e.srv.Serve(ln) }()
	return e, nil
}

// Addr is the address the server listens on.
func (e *Server) Addr() *net.TCPAddr { return e.ln.Addr().(*net.TCPAddr) }

// Close stops the server and waits for its serve loop.
func (e *Server) Close() { e.srv.Close(); <-e.done }

func serveVLESSEcho(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/load/Tun" || r.ProtoMajor != 2 {
		http.Error(w, "not a gun call", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	rc := http.NewResponseController(w)
	in := bufio.NewReader(r.Body)
	first := true
	for {
		data, err := readHunk(in)
		if err != nil {
			w.Header().Set("Grpc-Status", "0")
			return
		}
		if first {
			first = false
			if data, err = skipVLESSRequest(data); err != nil {
				w.Header().Set("Grpc-Status", "13")
				return
			}
			if _, err := w.Write(hunk([]byte{0, 0})); err != nil { // version 0, no addons
				return
			}
		}
		if len(data) > 0 {
			if _, err := w.Write(hunk(data)); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// readHunk reads one gRPC message (a flag byte, a 4-byte length, a
// protobuf Hunk whose field 1 is the data) and returns the data.
func readHunk(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > 1<<20 {
		return nil, errors.New("message too long")
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	if len(msg) == 0 {
		return nil, nil
	}
	if msg[0] != 0x0a {
		return nil, fmt.Errorf("hunk field tag %#x", msg[0])
	}
	l, k := binary.Uvarint(msg[1:])
	if k <= 0 || uint64(len(msg)-1-k) < l {
		return nil, errors.New("hunk length")
	}
	return msg[1+k : 1+k+int(l)], nil
}

// hunk frames data as one gRPC message of a Hunk.
func hunk(data []byte) []byte {
	pb := binary.AppendUvarint([]byte{0x0a}, uint64(len(data)))
	pb = append(pb, data...)
	out := make([]byte, 5, 5+len(pb))
	binary.BigEndian.PutUint32(out[1:], uint32(len(pb)))
	return append(out, pb...)
}

// skipVLESSRequest checks a VLESS TCP request header (version 0, the
// harness's UUID, addons, command, port, address) and returns what follows
// it; the header comes whole in the first message.
func skipVLESSRequest(b []byte) ([]byte, error) {
	bad := errors.New("not a VLESS request of the harness")
	if len(b) < 18 || b[0] != 0 || fmt.Sprintf("%x-%x-%x-%x-%x", b[1:5], b[5:7], b[7:9], b[9:11], b[11:17]) != UUID {
		return nil, bad
	}
	b = b[17:]
	if len(b) < 1+int(b[0]) {
		return nil, bad
	}
	b = b[1+int(b[0]):]
	if len(b) < 4 || b[0] != 1 { // TCP
		return nil, bad
	}
	b = b[3:] // command, port
	need := map[byte]int{1: 1 + 4, 3: 1 + 16}[b[0]]
	if b[0] == 2 && len(b) >= 2 {
		need = 2 + int(b[1])
	}
	if need == 0 || len(b) < need {
		return nil, bad
	}
	return b[need:], nil
}
