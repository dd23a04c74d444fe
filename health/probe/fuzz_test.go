package probe

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		noContent,
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + noContent,
		"HTTP/1.0 404 Not Found\nX: y\n z\n\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
		"HTTP/1.1 200",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := parseHead(b)
		if err != nil {
			if n != 0 {
				t.Fatalf("length %d with error %v", n, err)
			}
			return
		}
		if n == 0 {
			return
		}
		if n > len(b) || b[n-1] != '\n' {
			t.Fatalf("length %d of %d does not end a line", n, len(b))
		}
		if h.status < 100 || h.status > 999 {
			t.Fatalf("status %d", h.status)
		}
		// The head alone parses the same, and a cut head is incomplete.
		if h2, n2, err := parseHead(b[:n]); err != nil || n2 != n || h2 != h {
			t.Fatalf("head alone: %+v %d %v; was %+v %d", h2, n2, err, h, n)
		}
		if _, n3, err := parseHead(b[:n-1]); n3 != 0 || err != nil {
			t.Fatalf("head cut by one: %d, %v", n3, err)
		}
	})
}

func FuzzCheckReply(f *testing.F) {
	const id = 0x4242
	q := appendQuery(nil, id)
	f.Add(response(q, 0))
	f.Add(response(q, 3)[:12])
	f.Add(append(response(q, 0), 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1))
	f.Add(append(response(q, 0)[:12], 0xc0, 12, 0, 1, 0, 1))
	f.Fuzz(func(t *testing.T, p []byte) {
		err := checkReply(p, id)
		if err == nil && (len(p) < 12 || binary.BigEndian.Uint16(p) != id || p[2]&0x80 == 0) {
			t.Fatalf("accepted % x", p)
		}
	})
}

// fuzzConn is a connection whose reads come from the input and whose
// writes go nowhere; deadlines are no-ops, as the input ends.
type fuzzConn struct{ r io.Reader }

func (c *fuzzConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *fuzzConn) Close() error                     { return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// The HTTP/1 rounds read any server bytes without panicking, and a
// success is a valid status.
func FuzzHTTP1Rounds(f *testing.F) {
	f.Add([]byte(noContent + noContent))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\n" + noContent + "HTTP/1.1 404 Not Found\r\n\r\n"))
	f.Add([]byte(noContent + "HTTP/1.1 204"))
	tg, _ := parseTarget("http://probe.test/")
	f.Fuzz(func(t *testing.T, b []byte) {
		h := &h1{c: &fuzzConn{r: bytes.NewReader(b)}}
		for range 2 {
			_, fin, _, err := h.round(&tg, "GET")
			if err != nil {
				return
			}
			if fin.status < 200 || fin.status > 499 {
				t.Fatalf("success with status %d", fin.status)
			}
		}
	})
}

// h2Wire is a server's side of an HTTP/2 exchange, written with a framer.
func h2Wire(write func(fr *http2.Framer, headers func(sid uint32, end bool, kv ...string))) []byte {
	var out, hb bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&hb)
	write(fr, func(sid uint32, end bool, kv ...string) {
		hb.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndStream: end, EndHeaders: true})
	})
	return out.Bytes()
}

// The HTTP/2 client reads any server bytes without panicking.
func FuzzHTTP2(f *testing.F) {
	f.Add(h2Wire(func(fr *http2.Framer, headers func(uint32, bool, ...string)) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		fr.WriteSettingsAck()
		headers(1, true, ":status", "204")
		headers(3, false, ":status", "103", "link", "</a>")
		headers(3, true, ":status", "200", "content-type", "text/plain")
	}))
	f.Add(h2Wire(func(fr *http2.Framer, headers func(uint32, bool, ...string)) {
		fr.WriteSettings()
		fr.WritePing(false, [8]byte{1})
		headers(1, false, ":status", "200")
		fr.WriteData(1, true, nil)
		fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
	}))
	f.Add(h2Wire(func(fr *http2.Framer, headers func(uint32, bool, ...string)) {
		fr.WriteSettings()
		headers(1, true, ":status", "200")
		fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
	}))
	tg, _ := parseTarget("https://probe.test/")
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newH2(&fuzzConn{r: bytes.NewReader(b)})
		if h.start() != nil {
			return
		}
		for range 2 {
			if _, err := h.round(&tg, "GET"); err != nil {
				return
			}
		}
	})
}
