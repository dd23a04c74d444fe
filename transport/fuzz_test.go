package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"switchyard/spec"
)

// scriptConn is a connection whose reads come from a script and whose
// writes go nowhere.
type scriptConn struct{ r io.Reader }

func (c *scriptConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *scriptConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// decodeAll runs the hunk decoder over in, cut into pieces of at most step
// bytes, with an output buffer of outSize.
func decodeAll(in []byte, step, outSize int) ([]byte, error) {
	var d hunkDecoder
	var got []byte
	out := make([]byte, outSize)
	for len(in) > 0 {
		piece := in[:min(len(in), step)]
		for len(piece) > 0 {
			nin, nout, err := d.feed(piece, out)
			got = append(got, out[:nout]...)
			if err != nil {
				return got, err
			}
			if nin == 0 && nout == 0 {
				panic("no progress")
			}
			piece = piece[nin:]
		}
		in = in[min(len(in), step):]
	}
	if !d.atBoundary() {
		return got, errHunkTruncated
	}
	return got, nil
}

// The hunk decoder gives the same payload and the same verdict however
// the server's bytes are cut and however small the reader's buffer.
func FuzzHunkDecoder(f *testing.F) {
	f.Add(message([]byte("hello")), uint8(1), uint8(1))
	f.Add(append(message([]byte("a"), nil, []byte("bc")), message(bytes.Repeat([]byte{7}, 300))...), uint8(3), uint8(7))
	f.Add([]byte{0, 0, 0, 0, 0}, uint8(2), uint8(2))
	f.Add([]byte{0, 0, 0, 0, 6, 0x08, 0x96, 0x01, 0x0A, 0x01, 'x'}, uint8(5), uint8(1)) // a varint field, then data
	f.Add([]byte{0, 0, 0, 0, 9, 0x11, 1, 2, 3, 4, 5, 6, 7, 8}, uint8(4), uint8(9))      // a 64-bit field
	f.Add([]byte{1, 0, 0, 0, 0}, uint8(1), uint8(1))                                    // compressed
	f.Add([]byte{0, 0, 0, 0, 3, 0x0A, 0x05, 'a'}, uint8(1), uint8(1))                   // field past its message
	f.Add([]byte{0, 0, 0, 0, 11, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, step, outSize uint8) {
		want, werr := decodeAll(in, len(in)+1, 1<<16)
		got, gerr := decodeAll(in, int(step)+1, int(outSize)+1)
		if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
			t.Fatalf("whole: %x, %v; cut: %x, %v", want, werr, got, gerr)
		}
		if len(want) > len(in) {
			t.Fatal("more payload than input")
		}
	})
}

// Whatever the server sends, the WebSocket reader returns payload or an
// error, never panics, and an error other than a deadline is final.
func FuzzWSFrames(f *testing.F) {
	f.Add(serverFrame(opBinary, []byte("hello")))
	f.Add(append(serverFrame(opPing, []byte("p")), serverFrame(opClose, []byte{3, 232})...))
	f.Add([]byte{0x01, 0x02, 'a', 'b', 0x80, 0x01, 'c'})
	f.Add([]byte{0x82, 126, 0x01, 0x00})
	f.Add([]byte{0x82, 127, 0, 0, 0, 0, 0, 0, 0x10, 0})
	f.Add([]byte{0x82, 0x81, 1, 2, 3, 4, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := &scriptConn{r: bytes.NewReader(data)}
		c := newWSConn(sc, bufio.NewReaderSize(sc, responseBuf))
		total := 0
		buf := make([]byte, 100)
		for range len(data) + 2 {
			n, err := c.Read(buf)
			total += n
			if err != nil {
				if _, err2 := c.Read(buf); !errors.Is(err2, err) {
					t.Fatalf("error %v then %v", err, err2)
				}
				break
			}
		}
		if total > len(data) {
			t.Fatalf("%d payload bytes from %d", total, len(data))
		}
	})
}

// Early data rides in the handshake's header, base64url without padding,
// at most maxEarly bytes of the first Write; a ws path's "ed=" is taken
// out and nothing else of the path changes.
func FuzzWSEarlyData(f *testing.F) {
	f.Add([]byte("\x00vless header"), uint16(2048), "/ws")
	f.Add(bytes.Repeat([]byte{0xFF}, 300), uint16(10), "/path?ed=64&x=y")
	f.Add([]byte{}, uint16(1), "?ed=1")
	f.Add([]byte("x"), uint16(0), "/a?ed=&b")
	f.Fuzz(func(t *testing.T, first []byte, max uint16, path string) {
		cfg, err := newWSConfig(spec.Transport{Path: path, MaxEarlyData: int(max)}, "host.test")
		if err != nil {
			return
		}
		if strings.Contains(cfg.head.path, "?") {
			if q, err := url.ParseQuery(cfg.head.path[strings.IndexByte(cfg.head.path, '?')+1:]); err == nil && q.Has("ed") {
				t.Fatalf("path %q keeps ed", cfg.head.path)
			}
		}
		if cfg.maxEarly == 0 {
			return
		}
		early := first[:min(len(first), cfg.maxEarly)]
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(cfg.appendRequest(nil, "a2V5a2V5a2V5a2V5a2V5YQ==", early))))
		if err != nil {
			t.Fatalf("request does not parse: %v", err)
		}
		if req.RequestURI != cfg.head.path || req.Host != "host.test" {
			t.Fatalf("request %q for %q, Host %q", req.RequestURI, cfg.head.path, req.Host)
		}
		got, err := decodeEarly(req.Header.Get(DefaultEarlyDataHeader))
		if err != nil || !bytes.Equal(got, early) {
			t.Fatalf("early data %x (%v), want %x", got, err, early)
		}
	})
}

// Whatever frames the server sends on an open gRPC stream, the client
// fails or reads payload, without a panic.
func FuzzH2Server(f *testing.F) {
	frame := func(write func(fr *http2.Framer)) []byte {
		var b bytes.Buffer
		write(http2.NewFramer(&b, nil))
		return b.Bytes()
	}
	settings := frame(func(fr *http2.Framer) { fr.WriteSettings() })
	headers := frame(func(fr *http2.Framer) {
		var hb bytes.Buffer
		hb.Write([]byte{0x88}) // :status 200, static table
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	})
	data := frame(func(fr *http2.Framer) { fr.WriteData(1, false, message([]byte("payload"))) })
	end := frame(func(fr *http2.Framer) { fr.WriteData(1, true, nil) })
	f.Add(bytes.Join([][]byte{headers, data, end}, nil))
	f.Add(bytes.Join([][]byte{data, frame(func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeInternal) })}, nil))
	f.Add(frame(func(fr *http2.Framer) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
	}))
	f.Add(frame(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) }))
	f.Add(frame(func(fr *http2.Framer) { fr.WritePing(false, [8]byte{1}) }))
	f.Add(frame(func(fr *http2.Framer) { fr.WriteWindowUpdate(1, 1<<31-1) }))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := newH2Conn(&scriptConn{r: bytes.NewReader(append(append([]byte(nil), settings...), in...))}, &grpcConfig{authority: "a", path: "/s/Tun"})
		if err := c.handshake(); err != nil {
			t.Fatal(err)
		}
		s, err := c.open()
		if err != nil {
			t.Fatal(err)
		}
		g := newGRPCConn(s, func() {})
		c.readLoop() // returns at the end of the script
		buf := make([]byte, 64)
		for range len(in) + 2 {
			if _, err := g.Read(buf); err != nil {
				break
			}
		}
		g.Write([]byte("after"))
		g.Close()
	})
}
