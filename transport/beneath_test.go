package transport

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/spec"
)

func loopback(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan *net.TCPConn, 1)
	go func() { c, _ := ln.AcceptTCP(); got <- c }()
	c, err := net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// The TLS layer is never handed bytes past the record it reads, however
// the records and what follows them arrive; what follows stays for
// Beneath.
func TestRecordConnStopsAtRecords(t *testing.T) {
	c, s := loopback(t)
	rec := func(n int, fill byte) []byte {
		return append([]byte{0x17, 3, 3, byte(n >> 8), byte(n)}, bytes.Repeat([]byte{fill}, n)...)
	}
	var stream []byte
	stream = append(stream, rec(10, 'a')...)
	stream = append(stream, rec(16384, 'b')...)
	stream = append(stream, rec(0, 0)...)
	records := len(stream)
	raw := []byte("raw bytes on the tcp conn")
	stream = append(stream, raw...)
	s.Write(stream) // all at once: one read may take it all
	rc := &recordConn{TCPConn: c}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	var got []byte
	for _, want := range []int{15, 16389, 5} {
		have := 0
		for have < want {
			n, err := rc.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			have += n
			got = append(got, buf[:n]...)
		}
		if have != want {
			t.Fatalf("record of %d bytes read as %d", want, have)
		}
	}
	if !bytes.Equal(got, stream[:records]) {
		t.Fatal("the records differ")
	}
	// What the socket holds past the last record is the flow's. Wait for
	// every byte to have landed, then take it.
	time.Sleep(50 * time.Millisecond)
	tcp, rest := rc.beneath()
	if tcp != c {
		t.Fatal("another conn beneath")
	}
	more := make([]byte, 64)
	if len(rest) < len(raw) {
		n, _ := tcp.Read(more)
		rest = append(rest, more[:n]...)
	}
	if !bytes.Equal(rest, raw) {
		t.Fatalf("the rest is %q", rest)
	}
	if _, err := rc.Read(buf); err != ErrSteppedDown {
		t.Fatalf("a read after the step down: %v", err)
	}
}

// A read cut by its deadline inside a record header loses nothing: the
// next read goes on from the header's first bytes.
func TestRecordConnKeepsACutHeader(t *testing.T) {
	c, s := loopback(t)
	rc := &recordConn{TCPConn: c}
	s.Write([]byte{0x17, 3})
	buf := make([]byte, 100)
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := rc.Read(buf); n != 0 || err == nil {
		t.Fatalf("%d bytes, %v, before the header is whole", n, err)
	}
	s.Write([]byte{3, 0, 2, 'h', 'i', 'X'})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	for len(got) < 7 {
		n, err := rc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, []byte{0x17, 3, 3, 0, 2, 'h', 'i'}) {
		t.Fatalf("read %x", got)
	}
}

// A nowait read with nothing received fails at once, with a temporary
// error the TLS layer does not keep; with bytes there it reads them.
func TestRecordConnNowait(t *testing.T) {
	c, s := loopback(t)
	rc := &recordConn{TCPConn: c, open: true, nowait: true}
	start := time.Now()
	if n, err := rc.Read(make([]byte, 16)); n != 0 || err != errWouldBlock {
		t.Fatalf("nothing there: %d, %v", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a nowait read waited %v", d)
	}
	if ne, ok := errWouldBlock.(net.Error); !ok || !ne.Timeout() {
		t.Fatal("errWouldBlock is no temporary net.Error")
	}
	s.Write([]byte("there"))
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 16)
	if n, err := rc.Read(buf); err != nil || string(buf[:n]) != "there" {
		t.Fatalf("bytes there: %q, %v", buf[:n], err)
	}
	s.Close()
	time.Sleep(50 * time.Millisecond)
	if _, err := rc.Read(buf); err != io.EOF {
		t.Fatalf("after the peer closed: %v", err)
	}
}

// A stream that stays on TLS reads every record already received in one
// Read, as far as the buffer has room; before, one record a Read.
func TestTLSStreamReadTakesTheRecordsReceived(t *testing.T) {
	p := newPKI(t)
	c, s := loopback(t)
	srv := tls.Server(s, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
	go func() {
		if srv.Handshake() != nil {
			return
		}
		for _, r := range []string{"one ", "two ", "three ", "four"} {
			srv.Write([]byte(r)) // a record each
		}
	}()
	rc := &recordConn{TCPConn: c}
	tc := tls.Client(rc, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := &TLSStream{Conn: tc, raw: rc, version: tls.VersionTLS13}
	buf := make([]byte, 64<<10)
	time.Sleep(300 * time.Millisecond) // every record is received
	if n, err := st.Read(buf); err != nil || string(buf[:n]) != "one " {
		t.Fatalf("before StayOnTLS: %q, %v", buf[:n], err)
	}
	st.StayOnTLS()
	if n, err := st.Read(buf); err != nil || string(buf[:n]) != "two three four" {
		t.Fatalf("on TLS: %q, %v", buf[:n], err)
	}
}

// TLS over the tcp transport is a TLSStream that never steps down: a Read
// takes every record already received, and CloseWrite ends the stream's
// sending (the server reads the end).
func TestPlainTLSReadTakesTheRecordsReceived(t *testing.T) {
	p := newPKI(t)
	ended := make(chan error, 1)
	server := accept(t, func(c net.Conn) {
		tc := tls.Server(c, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		for _, r := range []string{"one ", "two ", "three ", "four"} {
			tc.Write([]byte(r)) // a record each
		}
		_, err := io.ReadAll(tc)
		ended <- err
	})
	c, err := dial(t, tlsOutbound(server, &spec.TLS{ServerName: serverName, CAFile: p.caFile}), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, ok := c.(*TLSStream)
	if !ok {
		t.Fatalf("a %T, want a *TLSStream", c)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	time.Sleep(300 * time.Millisecond) // every record is received
	if n, err := st.Read(buf); err != nil || string(buf[:n]) != "one two three four" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the server's read ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not read the end")
	}
}
