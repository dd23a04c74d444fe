package tun_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel hands the TUN the segments it offloaded (a TCP send larger
// than the MTU, a UDP send with UDP_SEGMENT) whole; the inbound gives a
// TCP segment to its stack whole and cuts a UDP one into its datagrams.
// A 16 MiB upload arrives intact (its SHA-256 at the server), and one
// UDP_SEGMENT send arrives as its four datagrams, each with its bytes.
func TestOffloadedSegmentsThroughTheTUN(t *testing.T) {
	l := newLab(t)
	sinkAddr, udpAddr := l.web+":9100", l.web+":9101"
	var ln net.Listener
	var pc net.PacketConn
	if err := in(l.server, func() (err error) {
		if ln, err = net.Listen("tcp", sinkAddr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", udpAddr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer pc.Close()
	go func() { // the sink answers the SHA-256 of what it read
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				h := sha256.New()
				io.Copy(h, c)
				c.Write(h.Sum(nil))
			}()
		}
	}()
	got := make(chan []byte, 16)
	go func() { // the datagram server keeps every datagram
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got <- bytes.Clone(buf[:n])
		}
	}()
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config(""))

	data := make([]byte, 16<<20)
	rand.Read(data)
	want := sha256.Sum256(data)
	err := in(l.client, func() error {
		c, err := net.DialTimeout("tcp", sinkAddr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		for off := 0; off < len(data); off += 256 << 10 {
			if _, err := c.Write(data[off : off+256<<10]); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
		}
		c.(*net.TCPConn).CloseWrite()
		sum, err := io.ReadAll(c)
		if err != nil || !bytes.Equal(sum, want[:]) {
			return fmt.Errorf("the sink's SHA-256 %x, %v; sent %x", sum, err, want)
		}

		u, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(udpAddr)))
		if err != nil {
			return err
		}
		defer u.Close()
		rc, err := u.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) })
		if serr != nil {
			return fmt.Errorf("UDP_SEGMENT: %w", serr)
		}
		msg := make([]byte, 3500)
		rand.Read(msg)
		// The first send may race the association's opening: send until
		// the first datagram comes.
		for try := 0; ; try++ {
			if _, err := u.Write(msg); err != nil {
				return fmt.Errorf("a UDP_SEGMENT send: %w", err)
			}
			select {
			case d := <-got:
				if !bytes.Equal(d, msg[:1000]) {
					return fmt.Errorf("the first datagram: %d bytes, not the first 1000 sent", len(d))
				}
				for i, off := 1, 1000; off < len(msg); i, off = i+1, off+1000 {
					select {
					case d := <-got:
						if !bytes.Equal(d, msg[off:min(off+1000, len(msg))]) {
							return fmt.Errorf("datagram %d: %d bytes, not bytes %d.. of the send", i, len(d), off)
						}
					case <-time.After(2 * time.Second):
						return fmt.Errorf("datagram %d did not come", i)
					}
				}
				return nil
			case <-time.After(time.Second):
				if try == 4 {
					return fmt.Errorf("no datagram came")
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, sw.Logs)
	}
	if strings.Contains(sw.Logs.String(), "dropping a packet from the device") {
		t.Fatalf("the inbound dropped packets it read:\n%s", sw.Logs)
	}
}
