package http

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzHead feeds arbitrary proxy bytes to the head parser, whole and in two
// reads: both give the same answer, and an accepted head ends with an empty
// line after a 2xx status line.
func FuzzHead(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 Connection established\r\n\r\n"), 5)
	f.Add([]byte("HTTP/1.0 200 OK\r\nVia: x\r\n\r\ndata"), 20)
	f.Add([]byte("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"), 3)
	f.Add([]byte("HTTP/1.1 204\n\n"), 1)
	f.Add([]byte("HTTP/1.1 2x0 OK\r\n\r\n"), 0)
	f.Add([]byte("\r\n\r\n"), 2)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		var whole headParser
		end, err := whole.parse(b)
		if split < 0 || split > len(b) {
			split = len(b) / 2
		}
		var parts headParser
		end2, err2 := parts.parse(b[:split])
		if err2 == nil && end2 == 0 {
			end2, err2 = parts.parse(b)
		}
		if (err == nil) != (err2 == nil) || (err == nil && end != end2) {
			t.Fatalf("whole: %d %v; in two reads: %d %v", end, err, end2, err2)
		}
		var se *StatusError
		if errors.As(err, &se) && se.Code/100 == 2 {
			t.Fatalf("a 2xx status refused: %v", err)
		}
		if err != nil || end == 0 {
			return
		}
		if end > len(b) || !bytes.HasPrefix(b, []byte("HTTP/1.")) || b[end-1] != '\n' || b[9] != '2' {
			t.Fatalf("accepted a head of %d bytes: %q", end, b[:min(end, len(b))])
		}
	})
}
