package netx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
)

// receiverOn is a UDP socket bound to ip on loopback, and its address.
func receiverOn(t *testing.T, network string, ip net.IP) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	c, err := net.ListenUDP(network, &net.UDPAddr{IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// The raw sends address IPv4 and IPv6 peers as the net package does: the
// datagram arrives whole, from the socket's own port, one send at a time
// and segmented alike.
func TestRawSendsReachBothFamilies(t *testing.T) {
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	for _, tc := range []struct {
		network string
		ip      net.IP
		f       Family
	}{{"udp4", net.IPv4(127, 0, 0, 1), V4}, {"udp6", net.IPv6loopback, V6}} {
		rc, to := receiverOn(t, tc.network, tc.ip)
		if u.Socket(tc.f) == nil {
			t.Fatalf("no %s socket", tc.f)
		}
		local := u.Socket(tc.f).LocalAddr().(*net.UDPAddr).AddrPort().Port()
		if err := u.WriteTo([]byte("one"), to); err != nil {
			t.Fatalf("%s: WriteTo: %v", tc.network, err)
		}
		buf := make([]byte, 64)
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := rc.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:n]) != "one" || from.Port() != local {
			t.Fatalf("%s: read %q from %v, %v; want \"one\" from port %d", tc.network, buf[:n], from, err, local)
		}
		ps := numbered(300, 300, 300, 120)
		if n, err := u.WriteBatchTo(ps, to); err != nil || n != len(ps) {
			t.Fatalf("%s: WriteBatchTo = %d, %v", tc.network, n, err)
		}
		receiveAll(t, rc, ps)
	}
}

// A raw send allocates nothing: the address is built on the stack.
func TestRawSendAllocatesNothing(t *testing.T) {
	u := bindV4(t)
	_, to := batchReceiver(t)
	p := []byte("x")
	if n := testing.AllocsPerRun(100, func() { u.WriteTo(p, to) }); n != 0 {
		t.Fatalf("%v allocations a send, want none", n)
	}
}

// A raw send on a closed socket fails as the net package's does.
func TestRawSendOnClosedSocket(t *testing.T) {
	u := bindV4(t)
	_, to := batchReceiver(t)
	u.Close()
	err := u.WriteTo([]byte("x"), to)
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteTo on a closed socket = %v, want net.ErrClosed", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" {
		t.Fatalf("error %v is no write OpError", err)
	}
}

// A refused datagram's error names the system call: one larger than a
// datagram can be.
func TestRawSendErrorNamesTheCall(t *testing.T) {
	u := bindV4(t)
	_, to := batchReceiver(t)
	err := u.WriteTo(make([]byte, 70000), to)
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "sendto" || !errors.Is(err, syscall.EMSGSIZE) {
		t.Fatalf("a 70000-byte datagram = %v, want sendto: EMSGSIZE", err)
	}
}

// The writer waits in the poller while the descriptor is full and goes on
// once it drains: every byte arrives, in order, and no EAGAIN reaches the
// caller.
func TestNonblockingWriterWaitsWhileFull(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	nw := NonblockingWriter(rc)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB: four pipes' worth
	got := make(chan []byte)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the pipe fill
		b, _ := io.ReadAll(io.LimitReader(r, int64(len(want))))
		got <- b
	}()
	for off := 0; off < len(want); {
		n, err := nw.Write(want[off:min(off+4096, len(want))])
		if err != nil {
			t.Fatalf("Write at %d: %v", off, err)
		}
		off += n
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("read %d bytes, not the %d written", len(b), len(want))
	}
	w.Close()
	if n, err := nw.Write([]byte("x")); n != 0 || err == nil {
		t.Fatalf("Write after Close = %d, %v; want an error", n, err)
	}
}

// ReadNonblocking returns EAGAIN on an empty descriptor and what is
// waiting otherwise.
func TestReadNonblocking(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	read := func() (n int, err error) {
		buf := make([]byte, 16)
		if cerr := rc.Control(func(fd uintptr) { n, err = ReadNonblocking(fd, buf) }); cerr != nil {
			t.Fatal(cerr)
		}
		return n, err
	}
	if n, err := read(); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("read of an empty pipe = %d, %v; want EAGAIN", n, err)
	}
	w.Write([]byte("abc"))
	if n, err := read(); n != 3 || err != nil {
		t.Fatalf("read = %d, %v; want 3, nil", n, err)
	}
}
