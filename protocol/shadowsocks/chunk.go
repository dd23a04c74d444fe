package shadowsocks

import (
	"crypto/cipher"
	"errors"

	"switchyard/netx"
)

// ErrAuth is the error of a chunk or packet that fails authentication: a
// wrong password or method, or bytes altered on the way.
var ErrAuth error = &netx.FaultError{Kind: netx.FaultProxyAuth, Err: errors.New("shadowsocks: authentication failed (wrong password or method, or bytes altered on the way)")}

// nonce is the stream nonce of SIP004 and SIP022: a 12-byte little-endian
// counter from zero, incremented after every seal or open.
type nonce [12]byte

func (n *nonce) next() {
	for i := range n {
		n[i]++
		if n[i] != 0 {
			return
		}
	}
}

// Sealer seals one direction of a stream: the client's upload.
type Sealer struct {
	aead cipher.AEAD
	n    nonce
	max  int // largest payload of one chunk
}

// seal appends p sealed as one record (no length prefix) to dst.
func (s *Sealer) seal(dst, p []byte) []byte {
	dst = s.aead.Seal(dst, s.n[:], p, nil)
	s.n.next()
	return dst
}

// Seal appends chunks (a sealed two-byte length, then the sealed payload)
// carrying the start of p to dst, as many as fit in its capacity, and
// returns dst with the number of bytes of p sealed. A dst with no room for
// one byte of payload seals nothing.
func (s *Sealer) Seal(dst, p []byte) ([]byte, int) {
	done := 0
	for done < len(p) {
		room := cap(dst) - len(dst) - RecordOverhead
		if room <= 0 {
			break
		}
		n := min(len(p)-done, s.max, room)
		at := len(dst)
		dst = append(dst, byte(n>>8), byte(n))
		dst = s.seal(dst[:at], dst[at:at+2]) // in place
		dst = s.seal(dst, p[done:done+n])
		done += n
	}
	return dst, done
}

// opener opens one direction of a stream: the server's download.
type opener struct {
	aead cipher.AEAD
	n    nonce
}

// open authenticates and decrypts b in place.
func (o *opener) open(b []byte) ([]byte, error) {
	out, err := o.aead.Open(b[:0], o.n[:], b, nil)
	if err != nil {
		return nil, ErrAuth
	}
	o.n.next()
	return out, nil
}
