package vmess_test

import (
	"bytes"
	mrand "math/rand/v2"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/protocol/vmess"
	"switchyard/protocol/vmess/vmesstest"
)

// fixedSession is a session whose keys are the same on every run, so that
// fuzz inputs recorded against it keep their meaning.
func fixedSession(t testing.TB, sec vmess.Security, cmd vmess.Command) (*vmess.Session, []byte) {
	rnd := mrand.NewChaCha8([32]byte{1, 2, 3})
	s, err := vmess.NewSession(vmess.Request{Command: cmd, Security: sec, GlobalPadding: true, Dst: netx.DomainAddr("example.com", 80)}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := s.AppendRequest(nil, vmess.NewID(testUUID), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s, hdr
}

// decodeFuzz runs a decoder over b as if it all arrived at once, and checks
// the decoder's contract: a frame it takes lies within b and a payload
// within that frame.
func decodeFuzz(t *testing.T, d *vmess.Decoder, b []byte) {
	for range 1 << 16 {
		frame, payload, err := d.Decode(b)
		if err != nil {
			return
		}
		if frame <= 0 {
			t.Fatalf("frame of %d bytes", frame)
		}
		if frame > len(b) {
			return
		}
		if len(payload) > frame {
			t.Fatalf("payload of %d bytes in a frame of %d", len(payload), frame)
		}
		b = b[frame:]
		if d.Raw() {
			return
		}
	}
	t.Fatal("the decoder made no progress")
}

func FuzzDecodeResponseHeader(f *testing.F) {
	for _, sec := range securities {
		_, hdr := fixedSession(f, sec, vmess.CommandTCP)
		req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(sec), req.AppendResponseHeader(nil, req.Check))
		f.Add(byte(sec), req.AppendResponseHeader(nil, req.Check^1))
	}
	f.Add(byte(vmess.SecurityNone), make([]byte, 40))
	f.Fuzz(func(t *testing.T, sec byte, b []byte) {
		s, _ := fixedSession(t, securities[int(sec)%len(securities)], vmess.CommandTCP)
		decodeFuzz(t, s.NewDecoder(), b)
	})
}

func FuzzDecodeChunks(f *testing.F) {
	for _, sec := range securities {
		for _, cmd := range []vmess.Command{vmess.CommandTCP, vmess.CommandUDP} {
			_, hdr := fixedSession(f, sec, cmd)
			req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
			if err != nil {
				f.Fatal(err)
			}
			body := req.ResponseBody()
			var chunks []byte
			for _, p := range [][]byte{[]byte("hello"), make([]byte, 300), nil} {
				chunks = body.AppendChunk(chunks, p)
			}
			f.Add(byte(sec), byte(cmd), chunks)
		}
	}
	f.Add(byte(vmess.SecurityZero), byte(vmess.CommandUDP), []byte("\x00\x05hello\xff\xff"))
	f.Fuzz(func(t *testing.T, sec, cmd byte, chunks []byte) {
		command := vmess.CommandTCP
		if cmd%2 == 0 {
			command = vmess.CommandUDP
		}
		s, hdr := fixedSession(t, securities[int(sec)%len(securities)], command)
		req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
		if err != nil {
			t.Fatal(err)
		}
		decodeFuzz(t, s.NewDecoder(), append(req.AppendResponseHeader(nil, req.Check), chunks...))
	})
}
