package vmess

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"time"

	"switchyard/netx"
	"switchyard/protocol/mux"
)

// Request is what one flow asks of the server.
type Request struct {
	Command Command
	// Security is the configured security (SecurityZero included).
	Security Security
	// GlobalPadding pads every chunk of an AEAD security. The clear
	// securities never pad: Xray's server reads their stream chunks unpadded.
	GlobalPadding bool
	// Dst is the destination: of the stream, or of every datagram of a UDP
	// link. A Mux request names none: Mux.Cool carries its own.
	Dst netx.Addr
}

// Session is one flow's secrets: the body key and IV of each direction and
// the check byte the response header must echo.
type Session struct {
	req     Request
	opt     Option
	wire    Security // the security byte sent: zero travels as none
	reqKey  [16]byte
	reqIV   [16]byte
	respKey [16]byte
	respIV  [16]byte
	check   byte
	rand    io.Reader
}

// NewSession draws a flow's body keys from rnd (crypto/rand.Reader outside
// tests), which also supplies the header's padding and the chunks' padding
// bytes.
func NewSession(req Request, rnd io.Reader) (*Session, error) {
	switch req.Command {
	case CommandTCP, CommandUDP:
		if err := mux.CheckAddr(req.Dst); err != nil {
			return nil, fmt.Errorf("vmess: %w", err)
		}
	case CommandMux:
	default:
		return nil, fmt.Errorf("vmess: unknown command %d", req.Command)
	}
	s := &Session{req: req, rand: rnd}
	switch req.Security {
	case SecurityAES128GCM, SecurityChacha20Poly1305:
		s.wire = req.Security
		s.opt = OptionChunkStream | OptionChunkMasking
		if req.GlobalPadding {
			s.opt |= OptionGlobalPadding
		}
	case SecurityNone:
		s.wire = SecurityNone
		s.opt = OptionChunkStream | OptionChunkMasking
	case SecurityZero:
		s.wire = SecurityNone
		if req.Command == CommandUDP {
			// Datagrams keep their boundaries only in chunks: plain ones.
			s.opt = OptionChunkStream
		}
	default:
		return nil, fmt.Errorf("vmess: unknown security %d", req.Security)
	}
	var b [33]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return nil, fmt.Errorf("vmess: drawing the body keys: %w", err)
	}
	copy(s.reqKey[:], b[0:16])
	copy(s.reqIV[:], b[16:32])
	s.check = b[32]
	k := sha256.Sum256(s.reqKey[:])
	copy(s.respKey[:], k[:16])
	iv := sha256.Sum256(s.reqIV[:])
	copy(s.respIV[:], iv[:16])
	return s, nil
}

// Options is the option byte the request header carries.
func (s *Session) Options() Option { return s.opt }

// Framed reports whether the body travels in chunks (every security but a
// zero stream).
func (s *Session) Framed() bool { return s.opt&OptionChunkStream != 0 }

// AppendRequest appends the sealed request header to dst: the auth id, the
// header's sealed length, the connection nonce and the sealed header.
func (s *Session) AppendRequest(dst []byte, id *ID, now time.Time) ([]byte, error) {
	var plainBuf [MaxHeaderLen]byte
	p := plainBuf[:0]
	p = append(p, Version)
	p = append(p, s.reqIV[:]...)
	p = append(p, s.reqKey[:]...)
	p = append(p, s.check, byte(s.opt))
	var pad [16]byte
	if _, err := io.ReadFull(s.rand, pad[:1]); err != nil {
		return nil, fmt.Errorf("vmess: drawing the header padding: %w", err)
	}
	padLen := int(pad[0] % 16)
	p = append(p, byte(padLen<<4)|byte(s.wire), 0, byte(s.req.Command))
	if s.req.Command != CommandMux {
		p, _ = mux.AppendAddr(p, s.req.Dst) // NewSession checked it
	}
	if _, err := io.ReadFull(s.rand, pad[:padLen]); err != nil {
		return nil, fmt.Errorf("vmess: drawing the header padding: %w", err)
	}
	p = append(p, pad[:padLen]...)
	sum := fnv.New32a()
	sum.Write(p)
	p = sum.Sum(p)

	authID, err := id.newAuthID(now, s.rand)
	if err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := io.ReadFull(s.rand, nonce[:]); err != nil {
		return nil, fmt.Errorf("vmess: drawing the connection nonce: %w", err)
	}
	a, n := string(authID[:]), string(nonce[:])
	var length [2]byte
	binary.BigEndian.PutUint16(length[:], uint16(len(p)))
	lenKey := kdf16(id.cmdKey[:], saltHeaderLenKey, a, n)
	lenNonce := kdf12(id.cmdKey[:], saltHeaderLenNonce, a, n)
	hdrKey := kdf16(id.cmdKey[:], saltHeaderKey, a, n)
	hdrNonce := kdf12(id.cmdKey[:], saltHeaderNonce, a, n)

	dst = append(dst, authID[:]...)
	dst = newGCM(lenKey).Seal(dst, lenNonce[:], length[:], authID[:])
	dst = append(dst, nonce[:]...)
	dst = newGCM(hdrKey).Seal(dst, hdrNonce[:], p, authID[:])
	return dst, nil
}

func newGCM(key [16]byte) cipher.AEAD {
	block, err := aes.NewCipher(key[:])
	if err != nil { // a 16-byte key always makes a cipher
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil { // the standard nonce and tag sizes always make a GCM
		panic(err)
	}
	return aead
}
