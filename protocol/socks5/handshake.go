package socks5

import (
	"fmt"
	"io"
)

// ReadGreeting reads a client's greeting (VER NMETHODS METHODS) and returns
// the methods it offers.
func ReadGreeting(r io.Reader) (methods []byte, err error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("socks5: read greeting: %w", err)
	}
	if head[0] != Version {
		return nil, fmt.Errorf("socks5: unsupported version %d", head[0])
	}
	if head[1] == 0 {
		return nil, fmt.Errorf("socks5: greeting offers no method")
	}
	methods = make([]byte, head[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, fmt.Errorf("socks5: read greeting methods: %w", noEOF(err))
	}
	return methods, nil
}

// AppendGreeting appends a client greeting offering methods (at least one,
// at most 255).
func AppendGreeting(dst []byte, methods ...byte) ([]byte, error) {
	if len(methods) == 0 || len(methods) > 255 {
		return dst, fmt.Errorf("socks5: a greeting offers 1 to 255 methods, not %d", len(methods))
	}
	dst = append(dst, Version, byte(len(methods)))
	return append(dst, methods...), nil
}

// AppendMethodChoice appends the server's answer to a greeting: the chosen
// method, or MethodNoAcceptable.
func AppendMethodChoice(dst []byte, method byte) []byte {
	return append(dst, Version, method)
}

// ReadMethodChoice reads the server's answer to a greeting. A server that
// accepts none of the offered methods gives ErrNoAcceptableMethod.
func ReadMethodChoice(r io.Reader) (method byte, err error) {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("socks5: read method choice: %w", noEOF(err))
	}
	if b[0] != Version {
		return 0, fmt.Errorf("socks5: unexpected server version %d", b[0])
	}
	if b[1] == MethodNoAcceptable {
		return 0, ErrNoAcceptableMethod
	}
	return b[1], nil
}

// ReadUserPass reads an RFC 1929 username and password request.
func ReadUserPass(r io.Reader) (user, pass string, err error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", "", fmt.Errorf("socks5: read credentials: %w", noEOF(err))
	}
	if head[0] != userPassVersion {
		return "", "", fmt.Errorf("socks5: unsupported username/password version %d", head[0])
	}
	// The username, the password's length byte, and room for the password.
	var buf [255 + 1 + 255]byte
	ulen := int(head[1])
	if _, err := io.ReadFull(r, buf[:ulen+1]); err != nil {
		return "", "", fmt.Errorf("socks5: read credentials: %w", noEOF(err))
	}
	plen := int(buf[ulen])
	if _, err := io.ReadFull(r, buf[ulen+1:ulen+1+plen]); err != nil {
		return "", "", fmt.Errorf("socks5: read credentials: %w", noEOF(err))
	}
	return string(buf[:ulen]), string(buf[ulen+1 : ulen+1+plen]), nil
}

// AppendUserPass appends an RFC 1929 request; each field is at most 255
// bytes.
func AppendUserPass(dst []byte, user, pass string) ([]byte, error) {
	if len(user) > 255 || len(pass) > 255 {
		return dst, fmt.Errorf("socks5: username and password are at most 255 bytes each")
	}
	dst = append(dst, userPassVersion, byte(len(user)))
	dst = append(dst, user...)
	dst = append(dst, byte(len(pass)))
	return append(dst, pass...), nil
}

// AppendUserPassStatus appends the server's answer to RFC 1929
// credentials: status 0x00 when accepted, 0x01 when not.
func AppendUserPassStatus(dst []byte, ok bool) []byte {
	status := byte(0x01)
	if ok {
		status = 0x00
	}
	return append(dst, userPassVersion, status)
}

// ReadUserPassStatus reads the server's answer to RFC 1929 credentials:
// nil when accepted, ErrAuthRejected when not.
func ReadUserPassStatus(r io.Reader) error {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("socks5: read authentication status: %w", noEOF(err))
	}
	if b[0] != userPassVersion {
		return fmt.Errorf("socks5: unexpected username/password version %d", b[0])
	}
	if b[1] != 0x00 {
		return ErrAuthRejected
	}
	return nil
}
