package socks4

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("\x04\x01\x00\x50\x7f\x00\x00\x01alice\x00"))
	f.Add([]byte("\x04\x01\x00\x50\x00\x00\x00\x01bob\x00example.com\x00"))
	f.Add([]byte("\x04\x01\x00\x50\x00\x00\x00\x01\x00127.0.0.1\x00"))
	f.Add([]byte("\x04\x01\x00\x50\x00\x00\x00\x01\x00::1\x00"))
	f.Add([]byte("\x04\x02\x00\x15\x00\x00\x00\x01\x00ftp.example\x00"))
	f.Add([]byte("\x04\x01\x00\x50\x00\x00\x00\x01\x00\x00"))
	f.Add([]byte("\x04\x01\x00\x50\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(bytes.NewReader(b))
		req2, err2 := ReadRequest(onlyReader{bytes.NewReader(b)})
		if req != req2 || (err == nil) != (err2 == nil) {
			t.Fatalf("byte reader and plain reader disagree: %+v %v / %+v %v", req, err, req2, err2)
		}
		if err != nil && !errors.Is(err, ErrCommandNotSupported) {
			return
		}
		if len(req.UserID) > MaxUserIDLen || len(req.Dst.Name) > MaxNameLen {
			t.Fatalf("over-long field accepted: %+v", req)
		}
		enc, err := AppendRequest(nil, req.Cmd, req.Dst, req.UserID)
		if err != nil {
			t.Fatalf("a parsed request does not encode: %v", err)
		}
		r := bufio.NewReader(bytes.NewReader(append(enc, "tail"...)))
		again, err := ReadRequest(r)
		if again != req || (err == nil) != (req.Cmd == CmdConnect) {
			t.Fatalf("round trip: %+v -> % x -> %+v, %v", req, enc, again, err)
		}
		if rest, _ := r.Peek(r.Buffered()); string(rest) != "tail" {
			t.Fatalf("the request read %q past its end", enc)
		}
	})
}
