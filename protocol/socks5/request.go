package socks5

import (
	"fmt"
	"io"

	"switchyard/netx"
)

// Request is a client's request: the command and the address it names (the
// destination of a CONNECT, the client's expected source of a UDP
// ASSOCIATE, often 0.0.0.0:0).
type Request struct {
	Cmd byte
	Dst netx.Addr
}

// ReadRequest reads a request (VER CMD RSV ATYP DST.ADDR DST.PORT). The
// whole request is read before the command is checked, so a BIND or an
// unknown command returns the parsed Request with an error that Is
// ErrCommandNotSupported; an unknown address type gives an error that Is
// ErrAddressTypeNotSupported. A domain name that is an IP literal comes back
// as an IP.
func ReadRequest(r io.Reader) (Request, error) {
	var head [3]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Request{}, fmt.Errorf("socks5: read request: %w", err)
	}
	if head[0] != Version {
		return Request{}, fmt.Errorf("socks5: unsupported version %d", head[0])
	}
	if head[2] != 0 {
		return Request{}, fmt.Errorf("socks5: request reserved byte is %#02x, not 0", head[2])
	}
	dst, err := readAddr(r)
	if err != nil {
		return Request{}, err
	}
	req := Request{Cmd: head[1], Dst: dst}
	switch req.Cmd {
	case CmdConnect, CmdUDPAssociate:
		return req, nil
	case CmdBind:
		return req, fmt.Errorf("%w: BIND", ErrCommandNotSupported)
	}
	return req, fmt.Errorf("%w: %#02x", ErrCommandNotSupported, req.Cmd)
}

// AppendRequest appends a request for cmd naming addr. A UDP ASSOCIATE whose
// client does not know its source names netx.Addr{} (written 0.0.0.0:0).
func AppendRequest(dst []byte, cmd byte, addr netx.Addr) ([]byte, error) {
	out, ok := appendAddr(append(dst, Version, cmd, 0), addr)
	if !ok {
		return dst, CheckAddr(addr)
	}
	return out, nil
}

// AppendReply appends a reply with code and the bound address. An address
// with no host is written 0.0.0.0 with its port; so is a name too long to be
// written.
func AppendReply(dst []byte, code byte, bound netx.Addr) []byte {
	dst = append(dst, Version, code, 0)
	out, ok := appendAddr(dst, bound)
	if !ok {
		out, _ = appendAddr(dst, netx.Addr{Port: bound.Port})
	}
	return out
}

// ReadReply reads a server's reply. A reply whose code is not
// ReplySucceeded is returned as read, with a nil error: what a failure means
// is the caller's to decide (ReplyText names it).
func ReadReply(r io.Reader) (code byte, bound netx.Addr, err error) {
	var head [3]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, netx.Addr{}, fmt.Errorf("socks5: read reply: %w", noEOF(err))
	}
	if head[0] != Version {
		return 0, netx.Addr{}, fmt.Errorf("socks5: unexpected server version %d", head[0])
	}
	bound, err = readAddr(r)
	if err != nil {
		return 0, netx.Addr{}, err
	}
	return head[1], bound, nil
}
