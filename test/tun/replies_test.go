package tun_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	burstSegs = 20   // full datagrams of a burst
	burstSeg  = 1000 // their payload bytes
	burstLast = 300  // the shorter last datagram's
)

// burstPayload is the burst's datagrams' bytes, end to end: every byte
// tells its place.
func burstPayload() []byte {
	b := make([]byte, burstSegs*burstSeg+burstLast)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// burstServer answers each datagram on addr, in the servers' namespace,
// with a burst: burstSegs+1 datagrams sent with one UDP_SEGMENT send, so
// that they reach switchyard's socket together.
func (l *lab) burstServer(t *testing.T, addr string) {
	t.Helper()
	var pc *net.UDPConn
	if err := in(l.server, func() error {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		pc = c.(*net.UDPConn)
		rc, err := pc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, burstSeg)
		}); err != nil {
			return err
		}
		return serr
	}); err != nil {
		t.Fatal(err)
	}
	payload := burstPayload()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			pc.WriteToUDPAddrPort(payload, from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
}

// readBurst reads one burst on c and returns its bytes and the most
// datagrams one read carried: a socket with UDP_GRO reads a run the
// kernel kept whole as one read, with its datagram size in a control
// message.
func readBurst(c *net.UDPConn) ([]byte, int, error) {
	var got []byte
	most := 0
	buf := make([]byte, 65536)
	oob := make([]byte, 128)
	for len(got) < burstSegs*burstSeg+burstLast {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, oobn, _, _, err := c.ReadMsgUDP(buf, oob)
		if err != nil {
			return got, most, fmt.Errorf("after %d bytes: %w", len(got), err)
		}
		segs := 1
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return got, most, err
		}
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_UDP && m.Header.Type == unix.UDP_GRO && len(m.Data) >= 4 {
				size := int(binary.NativeEndian.Uint32(m.Data))
				segs = (n + size - 1) / size
			}
		}
		most = max(most, segs)
		got = append(got, buf[:n]...)
	}
	return got, most, nil
}

// Replies that reach switchyard's socket together go into the TUN as one
// packet that the kernel cuts into its datagrams: an application reads
// the same datagrams, in order, and one with UDP_GRO reads the run as one
// (which a device write of each datagram on its own never gives: a TUN
// write is no GRO). The burst's datagrams go back through the TUN from
// the direct outbound's socket.
func TestRepliesInARunReachTheApplication(t *testing.T) {
	l := newLab(t)
	addr := l.web + ":9103"
	l.burstServer(t, addr)
	l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config(""))
	want := burstPayload()
	server := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))
	for _, gro := range []bool{false, true} {
		var c *net.UDPConn
		if err := in(l.client, func() (err error) {
			c, err = net.ListenUDP("udp", &net.UDPAddr{})
			if err != nil || !gro {
				return err
			}
			rc, err := c.SyscallConn()
			if err != nil {
				return err
			}
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) }); err != nil {
				return err
			}
			return serr
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		most := 0
		// A reader that wakes for the first datagram of a burst before the
		// rest are queued writes it alone; the bursts after it find more.
		for try := 0; try < 10 && (most < 2 || !gro); try++ {
			if _, err := c.WriteToUDP([]byte("burst"), server); err != nil {
				t.Fatal(err)
			}
			got, m, err := readBurst(c)
			if err != nil {
				t.Fatalf("gro %v, burst %d: %v", gro, try, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("gro %v, burst %d: %d bytes, not the burst's %d", gro, try, len(got), len(want))
			}
			most = max(most, m)
			if !gro {
				if m != 1 {
					t.Fatalf("a socket without UDP_GRO read %d datagrams at once", m)
				}
				break
			}
		}
		if gro && most < 2 {
			t.Fatalf("in 10 bursts no run of replies reached the application as one packet")
		}
		t.Logf("gro %v: at most %d datagrams in one read", gro, most)
	}
}
