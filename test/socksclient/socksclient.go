// Package socksclient is a minimal SOCKS5 client for tests, written apart from
// the code under test so that it checks the wire format independently.
package socksclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// A minimal SOCKS5 client, independent of the code under test.

type ReplyError struct{ Code byte }

func (e ReplyError) Error() string { return fmt.Sprintf("socks5 reply %#x", e.Code) }

func Greet(c net.Conn, user, pass string) error {
	if user == "" {
		c.Write([]byte{5, 1, 0})
	} else {
		c.Write([]byte{5, 1, 2})
	}
	var r [2]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return err
	}
	if r[0] != 5 {
		return errors.New("bad version")
	}
	switch r[1] {
	case 0:
		return nil
	case 2:
		msg := []byte{1, byte(len(user))}
		msg = append(msg, user...)
		msg = append(msg, byte(len(pass)))
		msg = append(msg, pass...)
		c.Write(msg)
		if _, err := io.ReadFull(c, r[:]); err != nil {
			return err
		}
		if r[1] != 0 {
			return fmt.Errorf("auth refused with status %d", r[1])
		}
		return nil
	}
	return fmt.Errorf("no acceptable method (%#x)", r[1])
}

func AppendAddr(b []byte, host string, port uint16) []byte {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Is4() {
			b = append(b, 1)
		} else {
			b = append(b, 4)
		}
		b = append(b, ip.AsSlice()...)
	} else {
		b = append(b, 3, byte(len(host)))
		b = append(b, host...)
	}
	return binary.BigEndian.AppendUint16(b, port)
}

func ReadAddr(r io.Reader) (string, error) {
	var t [1]byte
	if _, err := io.ReadFull(r, t[:]); err != nil {
		return "", err
	}
	var host string
	switch t[0] {
	case 1, 4:
		b := make([]byte, map[byte]int{1: 4, 4: 16}[t[0]])
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		ip, _ := netip.AddrFromSlice(b)
		host = ip.String()
	case 3:
		var l [1]byte
		io.ReadFull(r, l[:])
		b := make([]byte, l[0])
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		host = string(b)
	default:
		return "", fmt.Errorf("bad address type %d", t[0])
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(p[:])))), nil
}

// Request sends a request and returns the bound address of the reply.
func Request(c net.Conn, cmd byte, host string, port uint16) (string, error) {
	c.Write(AppendAddr([]byte{5, cmd, 0}, host, port))
	var h [3]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return "", err
	}
	if h[1] != 0 {
		return "", ReplyError{Code: h[1]}
	}
	return ReadAddr(c)
}

// Dial opens a CONNECT through the proxy at proxy, waiting up to 10 s for
// the reply.
func Dial(proxy, target, user, pass string) (net.Conn, error) {
	return DialWithin(proxy, target, user, pass, 10*time.Second)
}

// DialWithin is Dial waiting up to d for the greeting and the reply.
func DialWithin(proxy, target, user, pass string, d time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(d))
	if err := Greet(c, user, pass); err != nil {
		c.Close()
		return nil, err
	}
	host, portText, _ := net.SplitHostPort(target)
	port, _ := strconv.Atoi(portText)
	if _, err := Request(c, 1, host, uint16(port)); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// Assoc is one SOCKS5 UDP association.
type Assoc struct {
	ctrl  net.Conn
	pc    *net.UDPConn
	relay *net.UDPAddr
}

func Associate(proxy string) (*Assoc, error) {
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if err := Greet(c, "", ""); err != nil {
		c.Close()
		return nil, err
	}
	bound, err := Request(c, 3, "0.0.0.0", 0)
	if err != nil {
		c.Close()
		return nil, err
	}
	relay, err := net.ResolveUDPAddr("udp", bound)
	if err != nil {
		c.Close()
		return nil, err
	}
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Assoc{ctrl: c, pc: pc, relay: relay}, nil
}

func (a *Assoc) Send(to string, payload []byte) error {
	host, portText, _ := net.SplitHostPort(to)
	port, _ := strconv.Atoi(portText)
	b := AppendAddr([]byte{0, 0, 0}, host, uint16(port))
	_, err := a.pc.WriteToUDP(append(b, payload...), a.relay)
	return err
}

// recv reads one reply within d; ok is false on timeout.
func (a *Assoc) Recv(d time.Duration) (from string, payload []byte, ok bool) {
	a.pc.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 65535)
	n, _, err := a.pc.ReadFromUDP(b)
	if err != nil {
		return "", nil, false
	}
	r := &sliceReader{b: b[3:n]}
	from, err = ReadAddr(r)
	if err != nil {
		return "", nil, false
	}
	return from, r.b, true
}

func (a *Assoc) Close() {
	a.ctrl.Close()
	a.pc.Close()
}

type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// PacketConn returns the association as a net.PacketConn, for clients that
// bring their own datagram protocol (QUIC): a datagram written to addr goes
// to the relay with a header naming addr; a datagram read is a reply, from
// the peer its header names. Closing it closes the association.
func (a *Assoc) PacketConn() net.PacketConn { return &assocConn{a: a} }

type assocConn struct{ a *Assoc }

func (c *assocConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if err := c.a.Send(addr.String(), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *assocConn) ReadFrom(p []byte) (int, net.Addr, error) {
	b := make([]byte, 65535)
	for {
		n, _, err := c.a.pc.ReadFromUDP(b)
		if err != nil {
			return 0, nil, err
		}
		if n < 3 {
			continue
		}
		r := &sliceReader{b: b[3:n]}
		from, err := ReadAddr(r)
		if err != nil {
			continue
		}
		addr, err := net.ResolveUDPAddr("udp", from)
		if err != nil {
			continue
		}
		return copy(p, r.b), addr, nil
	}
}

func (c *assocConn) Close() error                       { c.a.Close(); return nil }
func (c *assocConn) LocalAddr() net.Addr                { return c.a.pc.LocalAddr() }
func (c *assocConn) SetDeadline(t time.Time) error      { return c.a.pc.SetDeadline(t) }
func (c *assocConn) SetReadDeadline(t time.Time) error  { return c.a.pc.SetReadDeadline(t) }
func (c *assocConn) SetWriteDeadline(t time.Time) error { return c.a.pc.SetWriteDeadline(t) }
