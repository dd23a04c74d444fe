package vless

import (
	"io"
	"net"
	"net/netip"
	"testing"

	"switchyard/netx"
)

// memEchoConn is an upstream in memory that answers every write with the
// same bytes, after a greeting (the response header). Its buffer is reused
// once everything written has been read back.
type memEchoConn struct {
	net.Conn
	buf []byte
	r   int
}

func (c *memEchoConn) Write(p []byte) (int, error) {
	if c.r == len(c.buf) {
		c.buf, c.r = c.buf[:0], 0
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *memEchoConn) Read(p []byte) (int, error) {
	if c.r == len(c.buf) {
		return 0, io.EOF
	}
	n := copy(p, c.buf[c.r:])
	c.r += n
	return n, nil
}

// BenchmarkPacketLink is a single-target UDP link's steady state: per op,
// one 1400-byte packet framed by packetFraming and written upstream, and the
// echoed packet read, sized and opened through the link's buffer. MB/s
// counts both directions. It shows 0 allocs/op.
func BenchmarkPacketLink(b *testing.B) {
	const size = 1400
	target := netx.Addr{IP: netip.MustParseAddr("198.51.100.7"), Port: 443}
	up := &memEchoConn{buf: make([]byte, 0, 64<<10)}
	up.buf = append(up.buf, 0, 0) // the response header: version 0, no addons
	l := newPacketLink(up, target)
	payload := make([]byte, size)
	buf := make([]byte, 2048)
	roundTrip := func() {
		if err := l.WritePacket(payload, target); err != nil {
			b.Fatal(err)
		}
		if n, from, err := l.ReadPacket(buf); err != nil || n != size || from != target {
			b.Fatalf("%d bytes from %v: %v", n, from, err)
		}
	}
	roundTrip() // reads the response header
	b.ReportAllocs()
	b.SetBytes(2 * size)
	b.ResetTimer()
	for b.Loop() {
		roundTrip()
	}
}
