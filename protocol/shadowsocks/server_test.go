package shadowsocks

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"switchyard/netx"
)

// The server side of the wire format, for round trips: it decodes what the
// client writes and encodes what a server answers, independently of the
// client's state machines.

// serverStream is one TCP session as the server sees it.
type serverStream struct {
	c       *Cipher
	r       io.Reader
	open    opener
	reqSalt []byte
	target  netx.Addr
	pending []byte // the 2022 variable header's initial payload and later chunks
}

// acceptStream reads a request from r.
func acceptStream(c *Cipher, r io.Reader) (*serverStream, error) {
	s := &serverStream{c: c, r: r}
	k := c.m.KeyLen
	s.reqSalt = make([]byte, k)
	if _, err := io.ReadFull(r, s.reqSalt); err != nil {
		return nil, err
	}
	if !c.m.Is2022 {
		subkey, _ := aeadSubkey(c.key, s.reqSalt)
		aead, _ := c.m.newAEAD(subkey)
		s.open = opener{aead: aead}
		first, err := s.chunk()
		if err != nil {
			return nil, err
		}
		a, n, err := parseAddr(first)
		if err != nil {
			return nil, err
		}
		s.target, s.pending = a, first[n:]
		return s, nil
	}
	for i := range c.identityHeaders() {
		eih := make([]byte, aes.BlockSize)
		if _, err := io.ReadFull(r, eih); err != nil {
			return nil, err
		}
		subkey := make([]byte, k)
		deriveKey(subkey, identityContext, c.psks[i], s.reqSalt)
		b, _ := aes.NewCipher(subkey)
		b.Decrypt(eih, eih)
		if !bytes.Equal(eih, c.hashes[i+1][:]) {
			return nil, fmt.Errorf("identity header %d names no known key", i)
		}
	}
	aead, _ := c.m.newAEAD(sessionSubkey(c.key, s.reqSalt))
	s.open = opener{aead: aead}
	fixed, err := s.record(requestFixedLen)
	if err != nil {
		return nil, err
	}
	if fixed[0] != headerClient {
		return nil, fmt.Errorf("request type %d", fixed[0])
	}
	if err := checkTimestamp("request", binary.BigEndian.Uint64(fixed[1:]), c.now()); err != nil {
		return nil, err
	}
	vh, err := s.record(int(binary.BigEndian.Uint16(fixed[9:])))
	if err != nil {
		return nil, err
	}
	a, n, err := parseAddr(vh)
	if err != nil {
		return nil, err
	}
	pad := int(binary.BigEndian.Uint16(vh[n:]))
	if pad < 1 || pad > MaxPadding || n+2+pad > len(vh) {
		return nil, fmt.Errorf("padding %d", pad)
	}
	s.target, s.pending = a, vh[n+2+pad:]
	return s, nil
}

func (s *serverStream) record(n int) ([]byte, error) {
	b := make([]byte, n+TagLen)
	if _, err := io.ReadFull(s.r, b); err != nil {
		return nil, err
	}
	return s.open.open(b)
}

func (s *serverStream) chunk() ([]byte, error) {
	l, err := s.record(2)
	if err != nil {
		return nil, err
	}
	return s.record(int(binary.BigEndian.Uint16(l)))
}

// readAll returns the payload of every chunk until the end of r.
func (s *serverStream) readAll() ([]byte, error) {
	out := append([]byte(nil), s.pending...)
	for {
		b, err := s.chunk()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, b...)
	}
}

// response encodes the server's half: salt, the 2022 response header bound
// to reqSalt with the first chunk, then chunks of at most max bytes.
func response(c *Cipher, reqSalt, payload []byte, ts int64, max int) []byte {
	salt := make([]byte, c.m.KeyLen)
	rand.Read(salt)
	out := append([]byte(nil), salt...)
	var key []byte
	if c.m.Is2022 {
		key = sessionSubkey(c.key, salt)
	} else {
		key, _ = aeadSubkey(c.key, salt)
	}
	aead, _ := c.m.newAEAD(key)
	s := &Sealer{aead: aead, max: max}
	if c.m.Is2022 {
		first := payload[:min(len(payload), max)]
		payload = payload[len(first):]
		h := []byte{headerServer}
		h = binary.BigEndian.AppendUint64(h, uint64(ts))
		h = append(h, reqSalt...)
		h = binary.BigEndian.AppendUint16(h, uint16(len(first)))
		out = s.seal(out, h)
		out = s.seal(out, first)
	}
	for len(payload) > 0 {
		buf := make([]byte, 0, max+RecordOverhead)
		buf, n := s.Seal(buf, payload)
		out = append(out, buf...)
		payload = payload[n:]
	}
	return out
}

// serverPackets is the server's side of UDP sessions.
type serverPackets struct {
	c         *Cipher
	sessionID uint64
}

// openClient decodes a client packet: its session id, target and payload.
func (s *serverPackets) openClient(pkt []byte) (sid uint64, to netx.Addr, payload []byte, err error) {
	c := s.c
	pkt = append([]byte(nil), pkt...)
	var body []byte
	switch {
	case !c.m.Is2022:
		k := c.m.KeyLen
		aead, _ := c.packetAEAD(pkt[:k])
		if body, err = aead.Open(nil, zeroNonce[:], pkt[k:], nil); err != nil {
			return 0, netx.Addr{}, nil, err
		}
		a, n, err := parseAddr(body)
		return 0, a, body[n:], err
	case c.m.chacha:
		plain, err := c.udpX.Open(nil, pkt[:24], pkt[24:], nil)
		if err != nil {
			return 0, netx.Addr{}, nil, err
		}
		sid, body = binary.BigEndian.Uint64(plain), plain[separateHeader:]
	default:
		hdr := pkt[:separateHeader]
		first, _ := aes.NewCipher(c.psks[0])
		first.Decrypt(hdr, hdr)
		at := separateHeader
		for i := range c.identityHeaders() {
			eih := pkt[at : at+aes.BlockSize]
			b, _ := aes.NewCipher(c.psks[i])
			b.Decrypt(eih, eih)
			subtle16(eih, eih, hdr)
			if !bytes.Equal(eih, c.hashes[i+1][:]) {
				return 0, netx.Addr{}, nil, fmt.Errorf("identity header %d names no known key", i)
			}
			at += aes.BlockSize
		}
		sid = binary.BigEndian.Uint64(hdr)
		aead, _ := c.m.newAEAD(sessionSubkey(c.key, hdr[:8]))
		if body, err = aead.Open(nil, hdr[4:16], pkt[at:], nil); err != nil {
			return 0, netx.Addr{}, nil, err
		}
	}
	if body[0] != headerClient {
		return 0, netx.Addr{}, nil, fmt.Errorf("type %d", body[0])
	}
	pad := int(binary.BigEndian.Uint16(body[9:]))
	a, n, err := parseAddr(body[clientBodyFixed+pad:])
	return sid, a, body[clientBodyFixed+pad+n:], err
}

// sealServer encodes a server packet of session s to the client session
// clientID, with packet id pid, timestamp ts and pad bytes of padding.
func (s *serverPackets) sealServer(clientID, pid uint64, ts int64, pad int, from netx.Addr, payload []byte) []byte {
	c := s.c
	if !c.m.Is2022 {
		k := c.m.KeyLen
		salt := make([]byte, k)
		rand.Read(salt)
		aead, _ := c.packetAEAD(salt)
		alen, _ := addrLen(from)
		body := make([]byte, alen)
		putAddr(body, from)
		body = append(body, payload...)
		return aead.Seal(salt, zeroNonce[:], body, nil)
	}
	body := []byte{headerServer}
	body = binary.BigEndian.AppendUint64(body, uint64(ts))
	body = binary.BigEndian.AppendUint64(body, clientID)
	body = binary.BigEndian.AppendUint16(body, uint16(pad))
	body = append(body, make([]byte, pad)...)
	alen, _ := addrLen(from)
	a := make([]byte, alen)
	putAddr(a, from)
	body = append(body, a...)
	body = append(body, payload...)
	return s.sealBody(pid, body)
}

// sealBody seals a 2022 server packet with packet id pid around body, the
// plaintext after the separate header.
func (s *serverPackets) sealBody(pid uint64, body []byte) []byte {
	c := s.c
	hdr := binary.BigEndian.AppendUint64(nil, s.sessionID)
	hdr = binary.BigEndian.AppendUint64(hdr, pid)
	if c.m.chacha {
		nonce := make([]byte, 24)
		rand.Read(nonce)
		return c.udpX.Seal(nonce, nonce, append(hdr, body...), nil)
	}
	aead, _ := c.m.newAEAD(sessionSubkey(c.key, hdr[:8]))
	sealed := aead.Seal(nil, hdr[4:16], body, nil)
	var b cipher.Block
	b, _ = aes.NewCipher(c.key)
	b.Encrypt(hdr, hdr)
	return append(hdr, sealed...)
}
