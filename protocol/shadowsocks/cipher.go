package shadowsocks

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Cipher is the key material of one outbound, derived once from its method
// and password. It is read-only after New and shared by every flow.
type Cipher struct {
	m Method
	// key is the AEAD master key, or the 2022 user PSK (the last PSK).
	key []byte
	// psks are the 2022 PSKs, identity keys first and the user PSK last.
	psks [][]byte
	// hashes[i] is pskHash(psks[i]); an identity header for psks[i-1]
	// carries hashes[i].
	hashes [][16]byte
	// identity[i] is AES under psks[i], for i < len(psks)-1: it encrypts the
	// identity headers of UDP packets (2022 AES methods).
	identity []cipher.Block
	// udpSeal encrypts the separate header of a UDP packet toward the
	// server (AES under the first PSK); udpOpen decrypts the server's (AES
	// under the user PSK). 2022 AES methods only.
	udpSeal, udpOpen cipher.Block
	// udpX seals whole UDP packets with XChaCha20-Poly1305 under the PSK
	// (2022-blake3-chacha20-poly1305 only).
	udpX cipher.AEAD

	now func() time.Time // the clock timestamps are written and checked with
}

// New derives the key material of method with password. AEAD methods take
// any non-empty text; 2022 methods take base64 PSKs of the method's key
// length, "iPSK1:iPSK2:...:uPSK" for a server behind identity headers.
func New(method, password string) (*Cipher, error) {
	m, err := ParseMethod(method)
	if err != nil {
		return nil, err
	}
	c := &Cipher{m: m, now: time.Now}
	if !m.Is2022 {
		if password == "" {
			return nil, errors.New("shadowsocks: the password is empty")
		}
		c.key = EVPBytesToKey(password, m.KeyLen)
		return c, nil
	}
	if err := c.parsePSKs(password); err != nil {
		return nil, err
	}
	if m.chacha {
		if c.udpX, err = chacha20poly1305.NewX(c.key); err != nil {
			return nil, err
		}
		return c, nil
	}
	for _, psk := range c.psks[:len(c.psks)-1] {
		b, err := aes.NewCipher(psk)
		if err != nil {
			return nil, err
		}
		c.identity = append(c.identity, b)
	}
	if c.udpOpen, err = aes.NewCipher(c.key); err != nil {
		return nil, err
	}
	c.udpSeal = c.udpOpen
	if len(c.identity) > 0 {
		c.udpSeal = c.identity[0]
	}
	return c, nil
}

func (c *Cipher) parsePSKs(password string) error {
	if password == "" {
		return fmt.Errorf("shadowsocks: %s needs a base64 PSK of %d bytes as its password", c.m.Name, c.m.KeyLen)
	}
	parts := strings.Split(password, ":")
	if c.m.chacha && len(parts) > 1 {
		return fmt.Errorf("shadowsocks: %s has no identity headers: give one PSK, not %d", c.m.Name, len(parts))
	}
	for i, p := range parts {
		psk, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			return fmt.Errorf("shadowsocks: PSK %d of %d is not base64: %w", i+1, len(parts), err)
		}
		if len(psk) != c.m.KeyLen {
			return fmt.Errorf("shadowsocks: PSK %d of %d is %d bytes; %s needs %d", i+1, len(parts), len(psk), c.m.Name, c.m.KeyLen)
		}
		c.psks = append(c.psks, psk)
		c.hashes = append(c.hashes, pskHash(psk))
	}
	c.key = c.psks[len(c.psks)-1]
	return nil
}

// Method returns the cipher's method.
func (c *Cipher) Method() Method { return c.m }

// identityHeaders is how many identity headers a request carries.
func (c *Cipher) identityHeaders() int {
	if len(c.psks) == 0 {
		return 0
	}
	return len(c.psks) - 1
}
