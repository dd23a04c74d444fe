package shadowsocks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"switchyard/netx"
)

// The 2022 packet body after the separate header: type, timestamp, then
// (from the server) the client session id, then the padding length.
const (
	clientBodyFixed = 1 + 8 + 2
	serverBodyFixed = 1 + 8 + 8 + 2
	separateHeader  = 8 + 8 // session id, packet id
)

// seal2022 (AES methods): the separate header (session id, packet id)
// AES-encrypted under the first PSK, one identity header per identity PSK,
// then the body sealed under the session subkey with the header's last 12
// bytes as the nonce. No padding is added.
func (p *PacketClient) seal2022(buf []byte, to netx.Addr, alen int, payload []byte) ([]byte, error) {
	c := p.c
	hdrLen := separateHeader + aes.BlockSize*c.identityHeaders()
	bodyLen := clientBodyFixed + alen + len(payload)
	if hdrLen+bodyLen+TagLen > len(buf) {
		return nil, ErrFrameTooLarge
	}
	hdr := buf[:separateHeader]
	binary.BigEndian.PutUint64(hdr, p.sessionID)
	binary.BigEndian.PutUint64(hdr[8:], p.packetID)
	p.packetID++
	for i, b := range c.identity {
		eih := buf[separateHeader+aes.BlockSize*i:][:aes.BlockSize]
		subtle16(eih, c.hashes[i+1][:], hdr)
		b.Encrypt(eih, eih)
	}
	body := buf[hdrLen : hdrLen+bodyLen]
	putClientBody(body, to, payload, c)
	out := p.seal.Seal(body[:0], hdr[4:16], body, nil)
	c.udpSeal.Encrypt(hdr, hdr)
	return buf[:hdrLen+len(out)], nil
}

// sealXChaCha (2022-blake3-chacha20-poly1305): a random 24-byte nonce, then
// the separate header and the body sealed whole under the PSK.
func (p *PacketClient) sealXChaCha(buf []byte, to netx.Addr, alen int, payload []byte) ([]byte, error) {
	plainLen := separateHeader + clientBodyFixed + alen + len(payload)
	if xchachaNonceLen+plainLen+TagLen > len(buf) {
		return nil, ErrFrameTooLarge
	}
	rand.Read(buf[:xchachaNonceLen])
	plain := buf[xchachaNonceLen : xchachaNonceLen+plainLen]
	binary.BigEndian.PutUint64(plain, p.sessionID)
	binary.BigEndian.PutUint64(plain[8:], p.packetID)
	p.packetID++
	putClientBody(plain[separateHeader:], to, payload, p.c)
	out := p.c.udpX.Seal(plain[:0], buf[:xchachaNonceLen], plain, nil)
	return buf[:xchachaNonceLen+len(out)], nil
}

// putClientBody writes type 0, the timestamp, no padding, the address and
// the payload into b, sized for them.
func putClientBody(b []byte, to netx.Addr, payload []byte, c *Cipher) {
	b[0] = headerClient
	binary.BigEndian.PutUint64(b[1:], uint64(c.now().Unix()))
	binary.BigEndian.PutUint16(b[9:], 0)
	n := clientBodyFixed + putAddr(b[clientBodyFixed:], to)
	copy(b[n:], payload)
}

// subtle16 sets dst to a XOR b (16 bytes each).
func subtle16(dst, a, b []byte) {
	for i := range 16 {
		dst[i] = a[i] ^ b[i]
	}
}

func (p *PacketClient) open2022(pkt []byte) (netx.Addr, []byte, error) {
	if len(pkt) < separateHeader+serverBodyFixed+TagLen {
		return netx.Addr{}, nil, fmt.Errorf("shadowsocks 2022: a packet of %d bytes is too short", len(pkt))
	}
	hdr := pkt[:separateHeader]
	p.c.udpOpen.Decrypt(hdr, hdr)
	sid, pid := binary.BigEndian.Uint64(hdr), binary.BigEndian.Uint64(hdr[8:])
	s := p.session(sid)
	if s != nil && !s.window.fresh(pid) {
		return netx.Addr{}, nil, ErrReplay
	}
	var aead cipher.AEAD
	if s != nil {
		aead = s.open
	} else {
		var err error
		if aead, err = p.c.m.newAEAD(sessionSubkey(p.c.key, hdr[:8])); err != nil {
			return netx.Addr{}, nil, err
		}
	}
	body, err := aead.Open(pkt[separateHeader:separateHeader], hdr[4:16], pkt[separateHeader:], nil)
	if err != nil {
		return netx.Addr{}, nil, ErrAuth
	}
	return p.openServerBody(body, sid, pid, aead)
}

func (p *PacketClient) openXChaCha(pkt []byte) (netx.Addr, []byte, error) {
	if len(pkt) < xchachaNonceLen+separateHeader+serverBodyFixed+TagLen {
		return netx.Addr{}, nil, fmt.Errorf("shadowsocks 2022: a packet of %d bytes is too short", len(pkt))
	}
	plain, err := p.c.udpX.Open(pkt[xchachaNonceLen:xchachaNonceLen], pkt[:xchachaNonceLen], pkt[xchachaNonceLen:], nil)
	if err != nil {
		return netx.Addr{}, nil, ErrAuth
	}
	sid, pid := binary.BigEndian.Uint64(plain), binary.BigEndian.Uint64(plain[8:])
	if s := p.session(sid); s != nil && !s.window.fresh(pid) {
		return netx.Addr{}, nil, ErrReplay
	}
	return p.openServerBody(plain[separateHeader:], sid, pid, nil)
}

// openServerBody checks an authenticated server body — type 1, timestamp,
// our session id, padding, address — and then accepts its packet id.
func (p *PacketClient) openServerBody(b []byte, sid, pid uint64, aead cipher.AEAD) (netx.Addr, []byte, error) {
	if b[0] != headerServer {
		return netx.Addr{}, nil, fmt.Errorf("shadowsocks 2022: packet header type %d (want %d)", b[0], headerServer)
	}
	now := p.c.now()
	if err := checkTimestamp("packet", binary.BigEndian.Uint64(b[1:9]), now); err != nil {
		return netx.Addr{}, nil, err
	}
	if binary.BigEndian.Uint64(b[9:17]) != p.sessionID {
		return netx.Addr{}, nil, errors.New("shadowsocks 2022: the packet belongs to another client session")
	}
	pad := int(binary.BigEndian.Uint16(b[17:19]))
	if serverBodyFixed+pad > len(b) {
		return netx.Addr{}, nil, fmt.Errorf("shadowsocks 2022: padding of %d bytes runs past the packet", pad)
	}
	from, n, err := parseAddr(b[serverBodyFixed+pad:])
	if err != nil {
		return netx.Addr{}, nil, err
	}
	if err := p.accept(sid, pid, aead, now); err != nil {
		return netx.Addr{}, nil, err
	}
	return from, b[serverBodyFixed+pad+n:], nil
}

// session returns the known server session with id sid, or nil.
func (p *PacketClient) session(sid uint64) *serverSession {
	switch {
	case p.cur.valid && p.cur.id == sid:
		return &p.cur
	case p.prev.valid && p.prev.id == sid:
		return &p.prev
	}
	return nil
}

// accept records an authenticated packet. A new server session replaces the
// current one, which is kept to accept its late packets; a third session is
// refused while the replaced one was heard from within sessionSwitchGap.
func (p *PacketClient) accept(sid, pid uint64, aead cipher.AEAD, now time.Time) error {
	if s := p.session(sid); s != nil {
		s.window.add(pid)
		s.seen = now
		return nil
	}
	if p.cur.valid {
		if p.prev.valid && now.Sub(p.prev.seen) < sessionSwitchGap {
			return ErrTooManySessions
		}
		p.prev = p.cur
		p.prev.seen = now
	}
	p.cur = serverSession{id: sid, open: aead, seen: now, valid: true}
	p.cur.window.add(pid)
	return nil
}
