package shadowsocks

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"
)

var fuzzClock = time.Unix(1_700_000_000, 0)

func fuzzCipher(t testing.TB, method, password string) *Cipher {
	c := mustCipher(t, method, password)
	c.now = func() time.Time { return fuzzClock }
	return c
}

// FuzzReader feeds arbitrary server bytes to the reader of a TCP session,
// in arbitrary read sizes: it returns payload or an error, never panics,
// and never returns more than its buffer could hold.
func FuzzReader(f *testing.F) {
	aead := fuzzCipher(f, "aes-128-gcm", "fuzz")
	ss := fuzzCipher(f, "2022-blake3-aes-128-gcm", psk(16, 1))
	// The request salts the fuzzed responses answer are fixed.
	respAEAD := Response{c: aead}
	resp2022 := Response{c: ss}
	copy(resp2022.reqSalt[:], bytes.Repeat([]byte{7}, 16))
	for _, seed := range [][]byte{
		response(aead, nil, []byte("hello"), 0, 100),
		response(aead, nil, bytes.Repeat([]byte("a"), 300), 0, 100),
		response(ss, resp2022.reqSalt[:16], []byte("hello"), fuzzClock.Unix(), 100),
		response(ss, resp2022.reqSalt[:16], bytes.Repeat([]byte("b"), 300), fuzzClock.Unix(), 100),
		{},
		{1, 2, 3},
	} {
		f.Add(seed, uint8(0), false)
		f.Add(seed, uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, wire []byte, step uint8, is2022 bool) {
		resp := respAEAD
		if is2022 {
			resp = resp2022
		}
		var r io.Reader = bytes.NewReader(wire)
		if step > 0 {
			r = &chopReader{b: wire, n: int(step)}
		}
		rd := resp.NewReader(r, make([]byte, 512))
		got, _ := io.ReadAll(rd)
		if len(got) > len(wire) {
			t.Fatalf("%d bytes of payload from %d bytes of wire", len(got), len(wire))
		}
	})
}

// chopReader returns at most n bytes per Read.
type chopReader struct {
	b []byte
	n int
}

func (c *chopReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// FuzzResponseHeader seals arbitrary 2022 response headers and first
// chunks with the right key: only a header of type 1, a timestamp within
// 30 s and our request salt is accepted, and then the first chunk is the
// first payload.
func FuzzResponseHeader(f *testing.F) {
	c := fuzzCipher(f, "2022-blake3-aes-128-gcm", psk(16, 1))
	reqSalt := bytes.Repeat([]byte{9}, 16)
	good := []byte{headerServer}
	good = binary.BigEndian.AppendUint64(good, uint64(fuzzClock.Unix()))
	good = append(good, reqSalt...)
	good = binary.BigEndian.AppendUint16(good, 5)
	f.Add(good, []byte("first"))
	f.Add(good[:10], []byte{})
	f.Add(append([]byte{0}, good[1:]...), []byte("first"))
	f.Fuzz(func(t *testing.T, header, first []byte) {
		salt := bytes.Repeat([]byte{3}, 16)
		aead, _ := c.m.newAEAD(sessionSubkey(c.key, salt))
		s := &Sealer{aead: aead, max: MaxPayload2022}
		wire := s.seal(bytes.Clone(salt), header)
		wire = s.seal(wire, first)
		resp := Response{c: c}
		copy(resp.reqSalt[:], reqSalt)
		got, err := io.ReadAll(resp.NewReader(bytes.NewReader(wire), make([]byte, Buf2022)))
		if err != nil {
			return
		}
		valid := len(header) == 1+8+16+2 && header[0] == headerServer &&
			checkTimestamp("", binary.BigEndian.Uint64(header[1:]), fuzzClock) == nil &&
			bytes.Equal(header[9:25], reqSalt) && int(binary.BigEndian.Uint16(header[25:])) == len(first)
		if !valid {
			t.Fatalf("accepted header %x with first chunk of %d bytes", header, len(first))
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("payload %x, want %x", got, first)
		}
	})
}

// FuzzOpenPacketAEAD opens arbitrary AEAD datagrams, raw and sealed with
// the right key: an error or an address and payload within the packet.
func FuzzOpenPacketAEAD(f *testing.F) {
	c := fuzzCipher(f, "chacha20-ietf-poly1305", "fuzz")
	p, _ := c.NewPacketClient()
	srv := &serverPackets{c: c}
	for _, to := range targets {
		f.Add(srv.sealServer(0, 0, 0, 0, to, []byte("reply")), false)
		body := make([]byte, MaxAddrLen)
		body = append(body[:putAddr(body, to)], "reply"...)
		f.Add(body, true)
	}
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		pkt := b
		if seal {
			salt := bytes.Repeat([]byte{1}, c.m.KeyLen)
			aead, _ := c.packetAEAD(salt)
			pkt = aead.Seal(salt, zeroNonce[:], b, nil)
		}
		n := len(pkt)
		from, payload, err := p.Open(pkt)
		if err == nil && (!from.IsValid() || len(payload) > n) {
			t.Fatalf("opened %v with %d bytes from %d", from, len(payload), n)
		}
	})
}

// FuzzOpenPacket2022 opens arbitrary 2022 datagrams (AES and XChaCha),
// raw and with a body sealed under the right key, packet ids counting up.
func FuzzOpenPacket2022(f *testing.F) {
	aes := fuzzCipher(f, "2022-blake3-aes-128-gcm", psk(16, 1))
	xc := fuzzCipher(f, "2022-blake3-chacha20-poly1305", psk(32, 1))
	const client = 42 // the fuzzed client's session id
	for _, c := range []*Cipher{aes, xc} {
		srv := &serverPackets{c: c, sessionID: 9}
		for i, to := range targets {
			pkt := srv.sealServer(client, uint64(i), fuzzClock.Unix(), i*3, to, []byte("reply"))
			f.Add(pkt, c.m.chacha, false, uint64(i))
		}
	}
	body := []byte{headerServer}
	body = binary.BigEndian.AppendUint64(body, uint64(fuzzClock.Unix()))
	body = binary.BigEndian.AppendUint64(body, client)
	body = binary.BigEndian.AppendUint16(body, 2)
	body = append(body, 0, 0, atypIPv4, 10, 0, 0, 1, 0, 53, 'x')
	f.Add(body, false, true, uint64(1))
	f.Add(body, true, true, uint64(2))
	f.Fuzz(func(t *testing.T, b []byte, chacha, seal bool, pid uint64) {
		c := aes
		if chacha {
			c = xc
		}
		p, _ := c.NewPacketClient()
		p.sessionID = client
		pkt := b
		if seal {
			pkt = (&serverPackets{c: c, sessionID: 9}).sealBody(pid, b)
		}
		n := len(pkt)
		from, payload, err := p.Open(pkt)
		if err == nil && (!from.IsValid() || len(payload) > n) {
			t.Fatalf("opened %v with %d bytes from %d", from, len(payload), n)
		}
	})
}
