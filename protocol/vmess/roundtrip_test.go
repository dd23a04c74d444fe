package vmess_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/protocol/vmess"
	"switchyard/protocol/vmess/vmesstest"
)

var testUUID = [16]byte{0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11}

var securities = []vmess.Security{vmess.SecurityAES128GCM, vmess.SecurityChacha20Poly1305, vmess.SecurityNone, vmess.SecurityZero}

// The test server's KDF, written with crypto/hmac's own nesting, agrees
// with Xray's known answer too.
func TestServerKDFKnownAnswer(t *testing.T) {
	got := vmesstest.KDF([]byte("0123456789abcdef"), "VMess Header AEAD Key", "AUTHIDAUTHIDAUTH", "nonce123")
	if hex.EncodeToString(got) != "2a1ecd4cc3cd71efc7bc17f6d79c5039322fc812b693c9c3ddca210f2f7350e6" {
		t.Fatalf("kdf %x", got)
	}
}

// wantWire is the security byte and the options each configuration sends,
// as Xray's client sends them.
func wantWire(sec vmess.Security, cmd vmess.Command, padding bool) (byte, byte) {
	switch sec {
	case vmess.SecurityNone:
		return 5, 0x01 | 0x04
	case vmess.SecurityZero:
		if cmd == vmess.CommandUDP {
			return 5, 0x01
		}
		return 5, 0
	}
	if padding {
		return byte(sec), 0x01 | 0x04 | 0x08
	}
	return byte(sec), 0x01 | 0x04
}

func newSession(t testing.TB, req vmess.Request) (*vmess.Session, []byte) {
	t.Helper()
	s, err := vmess.NewSession(req, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := s.AppendRequest(nil, vmess.NewID(testUUID), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(hdr) > vmess.MaxHeaderLen {
		t.Fatalf("header of %d bytes, more than MaxHeaderLen %d", len(hdr), vmess.MaxHeaderLen)
	}
	return s, hdr
}

func TestRequestHeaderRoundTrip(t *testing.T) {
	dsts := []netx.Addr{
		{IP: netip.MustParseAddr("192.0.2.7"), Port: 443},
		{IP: netip.MustParseAddr("2001:db8::1"), Port: 53},
		{Name: "example.com", Port: 80},
		{Name: string(bytes.Repeat([]byte("a"), 255)), Port: 65535},
	}
	for _, sec := range securities {
		for _, cmd := range []vmess.Command{vmess.CommandTCP, vmess.CommandUDP, vmess.CommandMux} {
			for _, padding := range []bool{true, false} {
				for _, dst := range dsts {
					_, hdr := newSession(t, vmess.Request{Command: cmd, Security: sec, GlobalPadding: padding, Dst: dst})
					if cmd == vmess.CommandMux {
						dst = netx.Addr{} // a Mux request names no destination
					}
					r := bytes.NewReader(hdr)
					req, err := vmesstest.ReadRequest(r, testUUID)
					if err != nil {
						t.Fatalf("%v cmd %d: %v", sec, cmd, err)
					}
					if r.Len() != 0 {
						t.Fatalf("%d bytes after the header", r.Len())
					}
					wantSec, wantOpt := wantWire(sec, cmd, padding)
					if req.Version != 1 || req.Command != byte(cmd) || req.Security != wantSec || req.Options != wantOpt || req.Dst != dst {
						t.Fatalf("%v cmd %d padding %v: got %+v", sec, cmd, padding, req)
					}
					if d := time.Since(req.AuthTime); d < -time.Second || d > 2*time.Second {
						t.Fatalf("auth id time %v", req.AuthTime)
					}
				}
			}
		}
	}
}

func TestRequestRefusesBadDestination(t *testing.T) {
	for _, dst := range []netx.Addr{{Port: 80}, {Name: string(bytes.Repeat([]byte("a"), 256)), Port: 80}} {
		if _, err := vmess.NewSession(vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityNone, Dst: dst}, rand.Reader); err == nil {
			t.Errorf("destination %q accepted", dst.Name)
		}
	}
}

// payloads covers one byte, the largest payload every chunk takes (a padded
// sealed stream chunk's), and sizes in between.
var payloads = [][]byte{[]byte("x"), bytes.Repeat([]byte{7}, 1400), randomBytes(8110), randomBytes(100)}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestRequestBodyRoundTrip(t *testing.T) {
	for _, sec := range securities {
		for _, cmd := range []vmess.Command{vmess.CommandTCP, vmess.CommandUDP, vmess.CommandMux} {
			s, hdr := newSession(t, vmess.Request{Command: cmd, Security: sec, GlobalPadding: true, Dst: netx.DomainAddr("example.com", 80)})
			e := s.NewEncoder()
			wire := hdr
			for _, p := range payloads {
				var err error
				if wire, err = e.Seal(wire, p); err != nil {
					t.Fatal(err)
				}
			}
			wire, _ = e.SealEnd(wire)
			r := bytes.NewReader(wire)
			req, err := vmesstest.ReadRequest(r, testUUID)
			if err != nil {
				t.Fatal(err)
			}
			body := req.RequestBody()
			if !e.Framed() {
				rest, _ := io.ReadAll(r)
				if !bytes.Equal(rest, bytes.Join(payloads, nil)) {
					t.Fatalf("%v: unframed body differs", sec)
				}
				continue
			}
			for i, want := range payloads {
				got, err := body.ReadChunk(r)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%v cmd %d chunk %d: %d bytes, %v", sec, cmd, i, len(got), err)
				}
			}
			if _, err := body.ReadChunk(r); err != io.EOF {
				t.Fatalf("%v: end chunk: %v", sec, err)
			}
		}
	}
}

// serverResponse is what a server sends: the response header echoing check,
// then chunks of payloads and the end chunk.
func serverResponse(t testing.TB, hdr []byte, check func(byte) byte) []byte {
	t.Helper()
	req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		t.Fatal(err)
	}
	out := req.AppendResponseHeader(nil, check(req.Check))
	body := req.ResponseBody()
	for _, p := range payloads {
		out = body.AppendChunk(out, p)
	}
	return body.AppendChunk(out, nil)
}

func same(b byte) byte { return b }

// decodeAll feeds the decoder step bytes at a time, as a slow connection
// would, and collects the payloads.
func decodeAll(d *vmess.Decoder, wire []byte, step int) ([]byte, error) {
	var got, buf []byte
	for {
		frame, payload, err := d.Decode(buf)
		if err != nil {
			return got, err
		}
		if frame > len(buf) {
			if len(wire) == 0 {
				return got, io.ErrUnexpectedEOF
			}
			n := min(step, len(wire))
			buf, wire = append(buf, wire[:n]...), wire[n:]
			continue
		}
		got = append(got, payload...)
		buf = buf[frame:]
		if d.Raw() {
			got = append(got, buf...)
			return append(got, wire...), io.EOF
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for _, sec := range securities {
		for _, step := range []int{1, 7, 1 << 20} {
			s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: sec, GlobalPadding: true, Dst: netx.DomainAddr("example.com", 80)})
			got, err := decodeAll(s.NewDecoder(), serverResponse(t, hdr, same), step)
			if err != io.EOF {
				t.Fatalf("%v step %d: %v", sec, step, err)
			}
			if !bytes.Equal(got, bytes.Join(payloads, nil)) {
				t.Fatalf("%v step %d: body of %d bytes differs", sec, step, len(got))
			}
		}
	}
}

// A clear stream's chunk is handed out as it arrives, so a chunk of any
// size passes through a small buffer; clear datagrams stay whole.
func TestClearStreamChunksArriveInPieces(t *testing.T) {
	s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityNone, Dst: netx.DomainAddr("example.com", 80)})
	req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		t.Fatal(err)
	}
	big := randomBytes(0xFFFF)
	body := req.ResponseBody()
	wire := body.AppendChunk(req.AppendResponseHeader(nil, req.Check), big)
	wire = body.AppendChunk(wire, nil)
	d := s.NewDecoder()
	var got []byte
	buf := wire
	for {
		frame, payload, err := d.Decode(buf[:min(len(buf), 1000)])
		if err == io.EOF {
			break
		}
		if err != nil || frame > 1000 {
			t.Fatalf("frame %d: %v", frame, err)
		}
		if len(payload) > 0 && len(got)+len(payload) < len(big) && !d.Mid() {
			t.Fatal("Mid is false inside a chunk")
		}
		got = append(got, payload...)
		buf = buf[frame:]
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("%d bytes", len(got))
	}

	u, uhdr := newSession(t, vmess.Request{Command: vmess.CommandUDP, Security: vmess.SecurityNone, Dst: netx.DomainAddr("example.com", 53)})
	ureq, _ := vmesstest.ReadRequest(bytes.NewReader(uhdr), testUUID)
	uwire := ureq.ResponseBody().AppendChunk(ureq.AppendResponseHeader(nil, ureq.Check), big)
	ud := u.NewDecoder()
	frame, _, _ := ud.Decode(uwire)
	if frame, _, err := ud.Decode(uwire[frame:][:1000]); err != nil || frame != 2+len(big) {
		t.Fatalf("a datagram asks for %d bytes, %v", frame, err)
	}
}

func TestResponseCheckMismatch(t *testing.T) {
	for _, sec := range securities {
		s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: sec, Dst: netx.DomainAddr("example.com", 80)})
		d := s.NewDecoder()
		_, err := decodeAll(d, serverResponse(t, hdr, func(b byte) byte { return b + 1 }), 1<<20)
		if !errors.Is(err, vmess.ErrResponseMismatch) || err.Error() != "vmess: response header does not match the request" {
			t.Fatalf("%v: %v", sec, err)
		}
		if _, _, again := d.Decode(nil); again != err {
			t.Fatalf("the failure is not sticky: %v", again)
		}
	}
}

// A response sealed for another request does not open.
func TestResponseForAnotherRequest(t *testing.T) {
	s, _ := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityAES128GCM, Dst: netx.DomainAddr("example.com", 80)})
	_, other := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityAES128GCM, Dst: netx.DomainAddr("example.com", 80)})
	if _, err := decodeAll(s.NewDecoder(), serverResponse(t, other, same), 1<<20); !errors.Is(err, vmess.ErrResponseMismatch) {
		t.Fatalf("%v", err)
	}
}

func TestTamperedChunk(t *testing.T) {
	for _, sec := range []vmess.Security{vmess.SecurityAES128GCM, vmess.SecurityChacha20Poly1305} {
		s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: sec, Dst: netx.DomainAddr("example.com", 80)})
		wire := serverResponse(t, hdr, same)
		// The response header is 18 + 4 + 16 bytes; the first chunk's
		// ciphertext starts two bytes later.
		wire[38+2+3] ^= 0x40
		got, err := decodeAll(s.NewDecoder(), wire, 1<<20)
		if !errors.Is(err, vmess.ErrChunkAuth) || len(got) != 0 {
			t.Fatalf("%v: %d bytes, %v", sec, len(got), err)
		}
	}
}

// With masking the length on the wire is not the chunk's length, and each
// chunk's mask differs; a flipped length bit is caught as a bad length or a
// chunk that does not authenticate.
func TestMaskedLengths(t *testing.T) {
	s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityAES128GCM, Dst: netx.DomainAddr("example.com", 80)})
	e := s.NewEncoder()
	payload := []byte("same payload")
	var wire []byte
	var lengths [][2]byte
	for range 4 {
		start := len(wire)
		wire, _ = e.Seal(wire, payload)
		lengths = append(lengths, [2]byte(wire[start:start+2]))
		if len(wire)-start != 2+len(payload)+16 {
			t.Fatalf("chunk of %d bytes", len(wire)-start)
		}
	}
	plain := uint16(len(payload) + 16)
	for i, l := range lengths {
		if l == [2]byte{byte(plain >> 8), byte(plain)} {
			t.Errorf("chunk %d's length is in clear", i)
		}
		if i > 0 && l == lengths[0] {
			t.Errorf("chunk %d has chunk 0's masked length", i)
		}
	}
	req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		t.Fatal(err)
	}
	body := req.RequestBody()
	r := bytes.NewReader(wire)
	for range 4 {
		if got, err := body.ReadChunk(r); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%q %v", got, err)
		}
	}

	resp := serverResponse(t, hdr, same)
	resp[38] ^= 0x80 // the first chunk's length
	if _, err := decodeAll(s.NewDecoder(), resp, 1<<20); !errors.Is(err, vmess.ErrChunkAuth) && !errors.Is(err, vmess.ErrChunkLength) && err != io.ErrUnexpectedEOF {
		t.Fatalf("flipped length: %v", err)
	}
}

// Decode asks for a whole frame before it consumes anything.
func TestDecodeAsksForWholeFrames(t *testing.T) {
	s, hdr := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityChacha20Poly1305, Dst: netx.DomainAddr("example.com", 80)})
	wire := serverResponse(t, hdr, same)
	d := s.NewDecoder()
	if frame, _, err := d.Decode(wire[:5]); err != nil || frame != 18 {
		t.Fatalf("%d %v", frame, err)
	}
	if frame, _, err := d.Decode(wire[:18]); err != nil || frame != 18+4+16 {
		t.Fatalf("%d %v", frame, err)
	}
	if frame, p, err := d.Decode(wire[:38]); err != nil || frame != 38 || len(p) != 0 {
		t.Fatalf("%d %v", frame, err)
	}
	wire = wire[38:]
	frame, _, err := d.Decode(wire[:3])
	if err != nil || frame != 2+len(payloads[0])+16 {
		t.Fatalf("%d %v", frame, err)
	}
	if f2, p, err := d.Decode(wire[:frame]); err != nil || f2 != frame || !bytes.Equal(p, payloads[0]) {
		t.Fatalf("%d %q %v", f2, p, err)
	}
}

func TestSealRefusesEmptyAndOversizedPayloads(t *testing.T) {
	s, _ := newSession(t, vmess.Request{Command: vmess.CommandUDP, Security: vmess.SecurityAES128GCM, Dst: netx.DomainAddr("example.com", 53)})
	e := s.NewEncoder()
	if _, err := e.Seal(nil, nil); err == nil {
		t.Error("an empty payload was sealed")
	}
	if _, err := e.Seal(nil, make([]byte, e.MaxPayload()+1)); err == nil {
		t.Error("an oversized payload was sealed")
	}
	if out, err := e.Seal(nil, make([]byte, e.MaxPayload())); err != nil || len(out) > vmess.ChunkSize {
		t.Errorf("largest payload: %d bytes, %v", len(out), err)
	}
}

// Chunks are sized as Xray's client sizes them (8 KiB buffers): a sealed
// chunk, length, tag and largest padding included, and a datagram's chunk
// fit 8,192 bytes; a clear stream chunk carries 8,192 bytes of payload.
// Xray's server panics on a clear stream chunk larger than that.
func TestChunksAreSizedAsTheReferenceClientSizesThem(t *testing.T) {
	cases := []struct {
		sec     vmess.Security
		cmd     vmess.Command
		padding bool
		max     int // the largest payload of one chunk
		wire    int // the most bytes that chunk takes on the wire
	}{
		{vmess.SecurityAES128GCM, vmess.CommandTCP, false, 8174, 8192},
		{vmess.SecurityAES128GCM, vmess.CommandTCP, true, 8110, 8191},
		{vmess.SecurityChacha20Poly1305, vmess.CommandMux, false, 8174, 8192},
		{vmess.SecurityChacha20Poly1305, vmess.CommandMux, true, 8110, 8191},
		{vmess.SecurityNone, vmess.CommandTCP, true, 8192, 8194},
		{vmess.SecurityNone, vmess.CommandMux, false, 8192, 8194},
		{vmess.SecurityAES128GCM, vmess.CommandUDP, false, 8174, 8192},
		{vmess.SecurityChacha20Poly1305, vmess.CommandUDP, true, 8111, 8192},
		{vmess.SecurityNone, vmess.CommandUDP, true, 8190, 8192},
		{vmess.SecurityZero, vmess.CommandUDP, true, 8190, 8192},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/%d/padding=%v", tc.sec, tc.cmd, tc.padding), func(t *testing.T) {
			s, _ := newSession(t, vmess.Request{Command: tc.cmd, Security: tc.sec, GlobalPadding: tc.padding, Dst: netx.DomainAddr("example.com", 53)})
			e := s.NewEncoder()
			if got := e.MaxPayload(); got != tc.max {
				t.Fatalf("MaxPayload() = %d, want %d", got, tc.max)
			}
			longest := 0
			for range 200 { // padding is drawn per chunk: let the largest come up
				out, err := e.Seal(nil, make([]byte, tc.max))
				if err != nil {
					t.Fatal(err)
				}
				longest = max(longest, len(out))
			}
			if longest > tc.wire {
				t.Fatalf("a chunk of %d bytes on the wire, want at most %d", longest, tc.wire)
			}
			if _, err := e.Seal(nil, make([]byte, tc.max+1)); err == nil {
				t.Fatalf("a payload of %d bytes was sealed in one chunk", tc.max+1)
			}
		})
	}
	s, _ := newSession(t, vmess.Request{Command: vmess.CommandTCP, Security: vmess.SecurityZero, Dst: netx.DomainAddr("example.com", 80)})
	if e := s.NewEncoder(); e.Framed() || e.MaxPayload() < 1<<20 {
		t.Fatalf("an unframed body: framed %v, MaxPayload %d", e.Framed(), e.MaxPayload())
	}
}
