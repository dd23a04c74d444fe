package shadowsocks

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"switchyard/netx"
)

// Errors of a datagram from the server that is dropped.
var (
	// ErrReplay is a 2022 packet whose id its server session already sent.
	ErrReplay = errors.New("shadowsocks 2022: packet id already received (a replayed or duplicated packet)")
	// ErrTooManySessions is a third server session while the previous one
	// was still heard from within the last minute.
	ErrTooManySessions = errors.New("shadowsocks 2022: the server session changed more than once in the last minute")
)

// sessionSwitchGap is how long a replaced server session must have been
// silent before another may replace the current one.
const sessionSwitchGap = time.Minute

// xchachaNonceLen starts every 2022-blake3-chacha20-poly1305 packet.
const xchachaNonceLen = 24

var zeroNonce [12]byte // SIP004 packets use one subkey per packet and a zero nonce

// PacketClient is the client side of one UDP session toward the server. Seal
// and Open share no mutable state, so one goroutine may send while another
// receives; neither may be called by two goroutines at once.
type PacketClient struct {
	c *Cipher

	// Sending (Seal).
	sessionID uint64
	packetID  uint64
	seal      cipher.AEAD // 2022 AES: the session subkey of sessionID

	// Receiving (Open): the current server session and the one it replaced.
	cur, prev serverSession
}

type serverSession struct {
	id     uint64
	open   cipher.AEAD // 2022 AES: the session subkey of id
	window replayWindow
	seen   time.Time // last packet accepted (or when it was replaced)
	valid  bool
}

// NewPacketClient starts a UDP session with a random session id.
func (c *Cipher) NewPacketClient() (*PacketClient, error) {
	p := &PacketClient{c: c}
	if !c.m.Is2022 {
		return p, nil
	}
	var id [8]byte
	for p.sessionID == 0 {
		rand.Read(id[:])
		p.sessionID = binary.BigEndian.Uint64(id[:])
	}
	if !c.m.chacha {
		var err error
		if p.seal, err = c.m.newAEAD(sessionSubkey(c.key, id[:])); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Seal writes the packet carrying payload to to at the start of buf and
// returns it. A packet longer than buf fails with ErrFrameTooLarge.
func (p *PacketClient) Seal(buf []byte, to netx.Addr, payload []byte) ([]byte, error) {
	alen, err := addrLen(to)
	if err != nil {
		return nil, err
	}
	m := p.c.m
	switch {
	case !m.Is2022:
		return p.sealAEAD(buf, to, alen, payload)
	case m.chacha:
		return p.sealXChaCha(buf, to, alen, payload)
	}
	return p.seal2022(buf, to, alen, payload)
}

// sealAEAD: salt, then the address and payload sealed under the salt's
// subkey with a zero nonce. SIP004 gives every packet its own subkey, so
// each packet derives one (the only per-packet allocation of this package).
func (p *PacketClient) sealAEAD(buf []byte, to netx.Addr, alen int, payload []byte) ([]byte, error) {
	k := p.c.m.KeyLen
	if k+alen+len(payload)+TagLen > len(buf) {
		return nil, ErrFrameTooLarge
	}
	rand.Read(buf[:k])
	n := k + putAddr(buf[k:], to)
	n += copy(buf[n:], payload)
	aead, err := p.c.packetAEAD(buf[:k])
	if err != nil {
		return nil, err
	}
	out := aead.Seal(buf[k:k], zeroNonce[:], buf[k:n], nil)
	return buf[:k+len(out)], nil
}

// Open authenticates and decrypts the server's packet in place and returns
// the address the payload came from, with the payload (a part of pkt).
func (p *PacketClient) Open(pkt []byte) (netx.Addr, []byte, error) {
	m := p.c.m
	switch {
	case !m.Is2022:
		return p.openAEAD(pkt)
	case m.chacha:
		return p.openXChaCha(pkt)
	}
	return p.open2022(pkt)
}

func (p *PacketClient) openAEAD(pkt []byte) (netx.Addr, []byte, error) {
	k := p.c.m.KeyLen
	if len(pkt) < k+TagLen {
		return netx.Addr{}, nil, fmt.Errorf("shadowsocks: a packet of %d bytes is too short", len(pkt))
	}
	aead, err := p.c.packetAEAD(pkt[:k])
	if err != nil {
		return netx.Addr{}, nil, err
	}
	body, err := aead.Open(pkt[k:k], zeroNonce[:], pkt[k:], nil)
	if err != nil {
		return netx.Addr{}, nil, ErrAuth
	}
	from, n, err := parseAddr(body)
	if err != nil {
		return netx.Addr{}, nil, err
	}
	return from, body[n:], nil
}

// packetAEAD is the AEAD of one SIP004 packet: its own subkey from its salt.
func (c *Cipher) packetAEAD(salt []byte) (cipher.AEAD, error) {
	subkey, err := aeadSubkey(c.key, salt)
	if err != nil {
		return nil, err
	}
	return c.m.newAEAD(subkey)
}
