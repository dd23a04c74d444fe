package shadowsocks

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"switchyard/netx"
)

func psk(n int, seed byte) string {
	b := bytes.Repeat([]byte{seed}, n)
	b[0] = byte(n)
	return base64.StdEncoding.EncodeToString(b)
}

type testCase struct{ name, method, password string }

// cases is every method, and 2022 behind one and two identity headers.
func cases() []testCase {
	return []testCase{
		{"aes-128-gcm", "aes-128-gcm", "a password"},
		{"aes-256-gcm", "aes-256-gcm", "a password"},
		{"chacha20-ietf-poly1305", "chacha20-ietf-poly1305", "a password"},
		{"2022-aes-128", "2022-blake3-aes-128-gcm", psk(16, 1)},
		{"2022-aes-256", "2022-blake3-aes-256-gcm", psk(32, 1)},
		{"2022-chacha", "2022-blake3-chacha20-poly1305", psk(32, 1)},
		{"2022-aes-128-eih", "2022-blake3-aes-128-gcm", psk(16, 2) + ":" + psk(16, 3)},
		{"2022-aes-256-eih2", "2022-blake3-aes-256-gcm", psk(32, 4) + ":" + psk(32, 5) + ":" + psk(32, 6)},
	}
}

func mustCipher(t testing.TB, method, password string) *Cipher {
	t.Helper()
	c, err := New(method, password)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var targets = []netx.Addr{
	netx.DomainAddr("example.com", 443),
	{IP: netip.MustParseAddr("192.0.2.7"), Port: 53},
	{IP: netip.MustParseAddr("2001:db8::1"), Port: 8080},
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// upload seals p as a client flow does: through a staging buffer of the
// method's BufSize.
func upload(s *Sealer, stage, p []byte) []byte {
	var out []byte
	for len(p) > 0 {
		b, n := s.Seal(stage[:0], p)
		out = append(out, b...)
		p = p[n:]
	}
	return out
}

func TestStreamRoundTrip(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCipher(t, tc.method, tc.password)
			for _, target := range targets {
				req, up, resp, err := c.Request(nil, target)
				if err != nil {
					t.Fatal(err)
				}
				sent := random(200000)
				stage := make([]byte, c.m.BufSize())
				wire := append(req, upload(up, stage, sent)...)
				srv, err := acceptStream(c, bytes.NewReader(wire))
				if err != nil {
					t.Fatalf("server reading the request: %v", err)
				}
				if srv.target != target {
					t.Fatalf("target %v, want %v", srv.target, target)
				}
				got, err := srv.readAll()
				if err != nil || !bytes.Equal(got, sent) {
					t.Fatalf("upload differs (%d of %d bytes): %v", len(got), len(sent), err)
				}

				back := random(150000)
				down := response(c, srv.reqSalt, back, time.Now().Unix(), c.m.maxPayload())
				for _, wrap := range []func(io.Reader) io.Reader{
					func(r io.Reader) io.Reader { return r },
					iotest.OneByteReader,
					iotest.HalfReader,
				} {
					r := resp.NewReader(wrap(bytes.NewReader(down)), make([]byte, c.m.BufSize()))
					got, err := io.ReadAll(r)
					if err != nil || !bytes.Equal(got, back) {
						t.Fatalf("download differs (%d of %d bytes): %v", len(got), len(back), err)
					}
				}
			}
		})
	}
}

// The request carries no payload: a 2022 request is padded.
func TestRequestPadding(t *testing.T) {
	c := mustCipher(t, "2022-blake3-aes-128-gcm", psk(16, 1))
	sizes := map[int]bool{}
	for range 20 {
		req, _, _, err := c.Request(nil, targets[0])
		if err != nil {
			t.Fatal(err)
		}
		sizes[len(req)] = true
		if _, err := acceptStream(c, bytes.NewReader(req)); err != nil {
			t.Fatal(err)
		}
	}
	if len(sizes) < 2 {
		t.Fatalf("20 requests, all of one size: the padding does not vary")
	}
}

func TestRequestRefusesBadTarget(t *testing.T) {
	c := mustCipher(t, "aes-128-gcm", "x")
	if _, _, _, err := c.Request(nil, netx.DomainAddr(strings.Repeat("a", 256), 1)); err == nil {
		t.Fatal("a 256-byte name was encoded")
	}
	if _, _, _, err := c.Request(nil, netx.Addr{Port: 1}); err == nil {
		t.Fatal("an address without host was encoded")
	}
}

// A server that does not hold the request's identity keys is told apart.
func TestIdentityHeaderNamesUserKey(t *testing.T) {
	c := mustCipher(t, "2022-blake3-aes-128-gcm", psk(16, 2)+":"+psk(16, 3))
	other := mustCipher(t, "2022-blake3-aes-128-gcm", psk(16, 2)+":"+psk(16, 9))
	req, _, _, err := c.Request(nil, targets[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acceptStream(other, bytes.NewReader(req)); err == nil {
		t.Fatal("a server with another user key accepted the identity header")
	}
}

func readResponse(c *Cipher, resp Response, wire []byte) ([]byte, error) {
	return io.ReadAll(resp.NewReader(bytes.NewReader(wire), make([]byte, c.m.BufSize())))
}

func TestTamperedChunkFails(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCipher(t, tc.method, tc.password)
			_, _, resp, _ := c.Request(nil, targets[0])
			down := response(c, resp.reqSalt[:c.m.KeyLen], random(5000), time.Now().Unix(), 1000)
			for _, at := range []int{0, c.m.KeyLen + 1, len(down) / 2, len(down) - 1} {
				bad := bytes.Clone(down)
				bad[at] ^= 0x40
				_, err := readResponse(c, resp, bad)
				if !errors.Is(err, ErrAuth) {
					t.Fatalf("byte %d flipped: %v, want ErrAuth", at, err)
				}
			}
		})
	}
}

func TestResponseHeaderChecks(t *testing.T) {
	c := mustCipher(t, "2022-blake3-aes-256-gcm", psk(32, 1))
	_, _, resp, _ := c.Request(nil, targets[0])
	salt := resp.reqSalt[:32]
	now := time.Now().Unix()
	for _, tc := range []struct {
		name string
		wire []byte
		want string
	}{
		{"old timestamp", response(c, salt, []byte("x"), now-31, 100), "response header timestamp"},
		{"future timestamp", response(c, salt, []byte("x"), now+40, 100), "s from the local clock (at most 30 s allowed)"},
		{"another request", response(c, random(32), []byte("x"), now, 100), "answers another request"},
		{"client type", func() []byte {
			b := response(c, salt, []byte("x"), now, 100)
			return resealHeader(t, c, b, func(h []byte) { h[0] = headerClient })
		}(), "response header type 0 (want 1)"},
	} {
		_, err := readResponse(c, resp, tc.wire)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if got, err := readResponse(c, resp, response(c, salt, []byte("ok"), now-29, 100)); err != nil || string(got) != "ok" {
		t.Fatalf("a timestamp 29 s old: %q %v", got, err)
	}
}

// resealHeader decrypts a 2022 response's header, lets edit change it, and
// seals it again.
func resealHeader(t *testing.T, c *Cipher, wire []byte, edit func(h []byte)) []byte {
	k := c.m.KeyLen
	aead, _ := c.m.newAEAD(sessionSubkey(c.key, wire[:k]))
	n := 1 + 8 + k + 2 + TagLen
	h, err := aead.Open(nil, make([]byte, 12), wire[k:k+n], nil)
	if err != nil {
		t.Fatal(err)
	}
	edit(h)
	out := append(bytes.Clone(wire[:k]), aead.Seal(nil, make([]byte, 12), h, nil)...)
	return append(out, wire[k+n:]...)
}

func TestStreamEnds(t *testing.T) {
	for _, method := range []string{"aes-256-gcm", "2022-blake3-aes-128-gcm"} {
		pw := "x"
		if strings.HasPrefix(method, "2022") {
			pw = psk(16, 1)
		}
		c := mustCipher(t, method, pw)
		_, _, resp, _ := c.Request(nil, targets[0])
		down := response(c, resp.reqSalt[:c.m.KeyLen], random(3000), time.Now().Unix(), 1000)
		k := c.m.KeyLen
		for _, tc := range []struct {
			name string
			cut  int
			want error
		}{
			{"nothing", 0, nil},
			{"inside the salt", k - 1, ErrClosedInHandshake},
			{"inside a frame", len(down) - 5, ErrClosedInFrame},
		} {
			got, err := readResponse(c, resp, down[:tc.cut])
			if tc.want == nil {
				if err != nil || len(got) != 0 {
					t.Errorf("%s %s: %d bytes, %v; want a clean end", method, tc.name, len(got), err)
				}
				continue
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s %s: %v, want %v", method, tc.name, err, tc.want)
			}
		}
	}
}

// A chunk longer than the read buffer fails the flow with the spec's text;
// the failure sticks.
func TestUpstreamFrameTooLarge(t *testing.T) {
	c := mustCipher(t, "aes-128-gcm", "x")
	_, _, resp, _ := c.Request(nil, targets[0])
	down := response(c, nil, random(30000), 0, 30000)
	r := resp.NewReader(bytes.NewReader(down), make([]byte, BufAEAD))
	_, err := io.ReadAll(r)
	if !errors.Is(err, ErrUpstreamFrameTooLarge) || err.Error() != "upstream frame larger than the client runtime's buffer" {
		t.Fatalf("%v", err)
	}
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, ErrUpstreamFrameTooLarge) {
		t.Fatalf("after the failure: %v", err)
	}
	// The largest 2022 record fits Buf2022.
	c = mustCipher(t, "2022-blake3-aes-128-gcm", psk(16, 1))
	_, _, resp, _ = c.Request(nil, targets[0])
	big := random(3 * MaxPayload2022)
	got, err := readResponse(c, resp, response(c, resp.reqSalt[:16], big, time.Now().Unix(), MaxPayload2022))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("records of %d bytes: %v", MaxPayload2022, err)
	}
}

// The upload of a 2022 flow through its buffer is one record per write of
// up to MaxPayload2022 bytes; an AEAD chunk carries at most MaxPayloadAEAD.
func TestSealerChunking(t *testing.T) {
	c := mustCipher(t, "aes-128-gcm", "x")
	_, up, _, _ := c.Request(nil, targets[0])
	out, n := up.Seal(make([]byte, 0, BufAEAD), random(32*1024))
	if n != BufAEAD-2*RecordOverhead || len(out) != BufAEAD {
		t.Fatalf("sealed %d bytes into %d", n, len(out))
	}
	if _, n := up.Seal(make([]byte, 0, RecordOverhead), random(10)); n != 0 {
		t.Fatalf("sealed %d bytes with no room", n)
	}
	c = mustCipher(t, "2022-blake3-aes-128-gcm", psk(16, 1))
	_, up, _, _ = c.Request(nil, targets[0])
	if out, n := up.Seal(make([]byte, 0, Buf2022), random(100000)); n != MaxPayload2022 || len(out) != Buf2022 {
		t.Fatalf("2022: sealed %d bytes into %d", n, len(out))
	}
}

// Chunks that arrived together are handed out by one Read while p has room;
// a failure after them is kept for the next Read.
func TestOneReadReturnsEveryBufferedChunk(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCipher(t, tc.method, tc.password)
			_, _, resp, _ := c.Request(nil, targets[0])
			back := random(5000)
			down := response(c, resp.reqSalt[:c.m.KeyLen], back, time.Now().Unix(), 1000)
			down[len(down)-1] ^= 0x40 // the last chunk's tag
			r := resp.NewReader(bytes.NewReader(down), make([]byte, c.m.BufSize()))
			p := make([]byte, 32<<10)
			n, err := r.Read(p)
			if err != nil || !bytes.Equal(p[:n], back[:4000]) {
				t.Fatalf("first Read: %d bytes, %v; want the first four chunks (4000 bytes)", n, err)
			}
			if _, err := r.Read(p); !errors.Is(err, ErrAuth) {
				t.Fatalf("second Read: %v, want ErrAuth", err)
			}
		})
	}
}

// A reader given a small buffer grows it to the method's BufSize when a
// frame needs the room, however the bytes arrive; a frame larger than
// BufSize still fails the flow.
func TestReaderGrowsFromASmallBuffer(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCipher(t, tc.method, tc.password)
			_, _, resp, _ := c.Request(nil, targets[0])
			back := random(150000)
			down := response(c, resp.reqSalt[:c.m.KeyLen], back, time.Now().Unix(), c.m.maxPayload())
			for _, wrap := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader,
				iotest.HalfReader,
			} {
				got, err := io.ReadAll(resp.NewReader(wrap(bytes.NewReader(down)), make([]byte, 512)))
				if err != nil || !bytes.Equal(got, back) {
					t.Fatalf("download differs (%d of %d bytes): %v", len(got), len(back), err)
				}
			}
		})
	}
	c := mustCipher(t, "aes-128-gcm", "x")
	_, _, resp, _ := c.Request(nil, targets[0])
	down := response(c, nil, random(30000), 0, 30000)
	if _, err := io.ReadAll(resp.NewReader(bytes.NewReader(down), make([]byte, 512))); !errors.Is(err, ErrUpstreamFrameTooLarge) {
		t.Fatalf("a frame past BufSize from a small buffer: %v", err)
	}
}
