package socks5

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01\xbb"))
	f.Add([]byte("\x05\x01\x00\x03\x0bexample.com\x00\x50"))
	f.Add([]byte("\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x05\x02\x00\x03\x00\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x03\x09127.0.0.1\x00\x50"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		enc, err := AppendRequest(nil, req.Cmd, req.Dst)
		if err != nil {
			t.Fatalf("a parsed request does not encode: %v", err)
		}
		again, err := ReadRequest(bytes.NewReader(enc))
		if err != nil || again != req {
			t.Fatalf("round trip: %+v -> % x -> %+v, %v", req, enc, again, err)
		}
	})
}

func FuzzParseUDP(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x01\x7f\x00\x00\x01\x00\x35hello"))
	f.Add([]byte("\x00\x00\x00\x03\x0bexample.com\x01\xbbdata"))
	f.Add([]byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x35"))
	f.Add([]byte("\x00\x00\x01\x01\x7f\x00\x00\x01\x00\x35x"))
	f.Add([]byte("\x00\x00\x00\x03\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dst, payload, err := ParseUDP(b)
		var p UDPParser
		dst2, payload2, err2 := p.Parse(b)
		if (err == nil) != (err2 == nil) || dst != dst2 || !bytes.Equal(payload, payload2) {
			t.Fatalf("ParseUDP and UDPParser disagree: %v %v / %v %v", dst, err, dst2, err2)
		}
		if err != nil {
			if len(b) >= 4 && b[0] == 0 && b[1] == 0 && b[2] != 0 && !errors.Is(err, ErrFragmented) {
				t.Fatalf("a fragment gave %v, not ErrFragmented", err)
			}
			return
		}
		enc := AppendUDP(nil, dst, payload)
		dst3, payload3, err := ParseUDP(enc)
		if err != nil || dst3 != dst || !bytes.Equal(payload3, payload) {
			t.Fatalf("round trip: %v %q -> %v %q, %v", dst, payload, dst3, payload3, err)
		}
	})
}

func FuzzReadGreeting(f *testing.F) {
	f.Add([]byte("\x05\x01\x00"))
	f.Add([]byte("\x05\x02\x00\x02"))
	f.Add([]byte("\x04\x01\x00"))
	f.Add([]byte("\x05\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		methods, err := ReadGreeting(bytes.NewReader(b))
		if err != nil {
			return
		}
		enc, err := AppendGreeting(nil, methods...)
		if err != nil || !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("round trip: % x -> %v -> % x, %v", b, methods, enc, err)
		}
	})
}

func FuzzReadUserPass(f *testing.F) {
	f.Add([]byte("\x01\x05alice\x06s3cret"))
	f.Add([]byte("\x01\x00\x00"))
	f.Add([]byte("\x01\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		user, pass, err := ReadUserPass(bytes.NewReader(b))
		if err != nil {
			return
		}
		enc, err := AppendUserPass(nil, user, pass)
		if err != nil || !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("round trip: % x -> %q %q -> % x, %v", b, user, pass, enc, err)
		}
	})
}
