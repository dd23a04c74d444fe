// Package socks4 is the SOCKS4 wire format and its SOCKS4a extension (a
// domain name instead of an IPv4 address), for both ends: the server side
// parses requests and encodes replies, the client side encodes requests and
// parses replies. It opens no socket: parsers read from an io.Reader,
// encoders append to a byte slice.
package socks4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"switchyard/netx"
	"switchyard/protocol/internal/wireaddr"
)

// Version is the byte that starts every request.
const Version = 0x04

// replyVersion is the byte that starts every reply.
const replyVersion = 0x00

// Commands of a request.
const (
	CmdConnect byte = 0x01
	CmdBind    byte = 0x02
)

// Reply codes (the CD field of a reply).
const (
	ReplyGranted          byte = 0x5A
	ReplyRejected         byte = 0x5B // rejected or failed
	ReplyNoIdentd         byte = 0x5C // the server cannot reach the client's identd
	ReplyUserIDNotAllowed byte = 0x5D // the user id is not one the server accepts
)

// ReplyText names a reply code as the SOCKS4 protocol does.
func ReplyText(code byte) string {
	switch code {
	case ReplyGranted:
		return "request granted"
	case ReplyRejected:
		return "request rejected or failed"
	case ReplyNoIdentd:
		return "request rejected: cannot connect to identd on the client"
	case ReplyUserIDNotAllowed:
		return "request rejected: the user id is not allowed"
	}
	return "unassigned reply code"
}

// MaxUserIDLen is the longest user id a request may carry; MaxNameLen the
// longest SOCKS4a domain name. Longer ones are refused before they are read
// whole.
const (
	MaxUserIDLen = 255
	MaxNameLen   = wireaddr.MaxNameLen
)

// ErrCommandNotSupported: a request names BIND or an unknown command. The
// server answers ReplyRejected.
var ErrCommandNotSupported = errors.New("socks4: command not supported")

// Request is a client's request.
type Request struct {
	Cmd    byte
	Dst    netx.Addr // an IPv4 address (SOCKS4) or, from SOCKS4a, a name or an IP given as text
	UserID string
}

// ReadRequest reads a request: VN CD DSTPORT DSTIP USERID NUL, and, when
// DSTIP is 0.0.0.x with x non-zero (SOCKS4a), the domain name and a NUL.
// The whole request is read before the command is checked, so a BIND or an
// unknown command returns the parsed Request with an error that Is
// ErrCommandNotSupported. A SOCKS4a name that is an IP in text comes back
// as an IP. When r is an io.ByteReader the strings are read byte by byte
// from it; otherwise each byte is one Read.
func ReadRequest(r io.Reader) (Request, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Request{}, fmt.Errorf("socks4: read request: %w", err)
	}
	if head[0] != Version {
		return Request{}, fmt.Errorf("socks4: unsupported version %d", head[0])
	}
	port := binary.BigEndian.Uint16(head[2:4])
	ip := netip.AddrFrom4([4]byte(head[4:8]))
	br := byteReader(r)
	var buf [MaxNameLen]byte
	id, err := readString(br, buf[:MaxUserIDLen], "user id")
	if err != nil {
		return Request{}, err
	}
	req := Request{Cmd: head[1], Dst: netx.Addr{IP: ip, Port: port}, UserID: string(id)}
	if is4a(ip) {
		name, err := readString(br, buf[:MaxNameLen], "domain name")
		if err != nil {
			return Request{}, err
		}
		if len(name) == 0 {
			return Request{}, errors.New("socks4: empty domain name")
		}
		if req.Dst, err = wireaddr.Host(name, port, nil); err != nil {
			return Request{}, fmt.Errorf("socks4: %w", err)
		}
	}
	switch req.Cmd {
	case CmdConnect:
		return req, nil
	case CmdBind:
		return req, fmt.Errorf("%w: BIND", ErrCommandNotSupported)
	}
	return req, fmt.Errorf("%w: %#02x", ErrCommandNotSupported, req.Cmd)
}

// is4a reports whether a request's address is the SOCKS4a marker 0.0.0.x,
// x non-zero: a domain name follows the user id.
func is4a(ip netip.Addr) bool {
	b := ip.As4()
	return b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] != 0
}

// readString reads bytes up to a NUL into buf and returns them without it.
// More than len(buf) bytes before the NUL is an error.
func readString(r io.ByteReader, buf []byte, what string) ([]byte, error) {
	for n := 0; ; n++ {
		c, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("socks4: read %s: %w", what, noEOF(err))
		}
		if c == 0 {
			return buf[:n], nil
		}
		if n == len(buf) {
			return nil, fmt.Errorf("socks4: %s longer than %d bytes", what, len(buf))
		}
		buf[n] = c
	}
}

// AppendRequest appends a request for cmd to dst. An IPv4 destination is
// written as SOCKS4, unless it is itself a SOCKS4a marker (0.0.0.x); a name
// and any other IP are written as SOCKS4a, the IP in text. userID may not
// hold a NUL.
func AppendRequest(b []byte, cmd byte, dst netx.Addr, userID string) ([]byte, error) {
	if err := wireaddr.Check(dst); err != nil {
		return b, fmt.Errorf("socks4: %w", err)
	}
	if len(userID) > MaxUserIDLen {
		return b, fmt.Errorf("socks4: user id of %d bytes is longer than %d", len(userID), MaxUserIDLen)
	}
	if hasNUL(userID) {
		return b, errors.New("socks4: user id holds a NUL byte")
	}
	var name string
	ip := dst.IP.Unmap()
	switch {
	case dst.Name != "":
		name = dst.Name
	case !ip.Is4() || is4a(ip):
		name = ip.String()
	}
	if hasNUL(name) {
		return b, errors.New("socks4: domain name holds a NUL byte")
	}
	b = append(b, Version, cmd)
	b = binary.BigEndian.AppendUint16(b, dst.Port)
	if name != "" {
		b = append(b, 0, 0, 0, 1)
	} else {
		a := ip.As4()
		b = append(b, a[:]...)
	}
	b = append(append(b, userID...), 0)
	if name != "" {
		b = append(append(b, name...), 0)
	}
	return b, nil
}

// AppendReply appends a reply with code and the bound address: its port
// and, when it is an IPv4 address, the address (0.0.0.0 otherwise).
func AppendReply(b []byte, code byte, bound netip.AddrPort) []byte {
	b = append(b, replyVersion, code)
	b = binary.BigEndian.AppendUint16(b, bound.Port())
	ip := bound.Addr().Unmap()
	if !ip.Is4() {
		ip = netip.IPv4Unspecified()
	}
	a := ip.As4()
	return append(b, a[:]...)
}

// ReadReply reads a server's reply. A reply whose code is not ReplyGranted
// is returned as read, with a nil error: ReplyText names it.
func ReadReply(r io.Reader) (code byte, bound netip.AddrPort, err error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, netip.AddrPort{}, fmt.Errorf("socks4: read reply: %w", noEOF(err))
	}
	if b[0] != replyVersion {
		return 0, netip.AddrPort{}, fmt.Errorf("socks4: unexpected reply version %d", b[0])
	}
	bound = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	return b[1], bound, nil
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// byteReader returns r as an io.ByteReader, reading one byte per Read when
// it is not one.
func byteReader(r io.Reader) io.ByteReader {
	if br, ok := r.(io.ByteReader); ok {
		return br
	}
	return &oneByte{r: r}
}

type oneByte struct {
	r io.Reader
	b [1]byte
}

func (o *oneByte) ReadByte() (byte, error) {
	if _, err := io.ReadFull(o.r, o.b[:]); err != nil {
		return 0, err
	}
	return o.b[0], nil
}

// noEOF turns an EOF in the middle of a message into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
