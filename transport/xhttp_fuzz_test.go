package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/spec"
)

// FuzzXHTTPResponse feeds arbitrary server bytes to an XHTTP flow's
// download, over HTTP/1.1 (packet-up: the response head and its chunked
// body) and over cleartext HTTP/2 (stream-one: the server's frames). A
// dial and the reads after it end with data or an error: never a panic,
// never a hang, and nothing left running after Close.
func FuzzXHTTPResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"), false)
	f.Add([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx"), false)
	f.Add([]byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00"), true)
	f.Add([]byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x04\x01\x00\x00\x00\x00\x00\x00\x05\x01\x04\x00\x00\x00\x01\x88"), true)
	f.Fuzz(func(t *testing.T, script []byte, h2 bool) {
		mode := "packet-up"
		if h2 {
			mode = "stream-one"
		}
		d, err := New(spec.Outbound{Server: "127.0.0.1:1", Transport: spec.Transport{Type: "xhttp", Path: "/f", Mode: mode}}, deps(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		d.xhttp.tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
			return &scriptConn{r: bytes.NewReader(script)}, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := d.Dial(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	})
}
