package wireguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/tun"
)

// Two devices wired by hand, as the WireGuard device wires one to its
// peer: what one stack emits comes out of its Read, and Write hands it to
// the other stack, whose wildcard endpoint takes datagrams of both
// families. A packet of no IP version in a batch is dropped.
func TestStackDevicesCarryDatagramsOfBothFamilies(t *testing.T) {
	a := newTestStack(t, "10.7.0.2", "fd00:7::2")
	b := newTestStack(t, "10.7.0.1", "fd00:7::1")
	from, err := a.listenUDP(5000)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := b.listenUDP(9)
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()

	pumped := make(chan error, 1)
	go func() {
		const offset = 16
		bufs, sizes := [][]byte{make([]byte, offset+1500)}, []int{0}
		junk := make([]byte, offset+20)
		for {
			if _, err := a.Read(bufs, sizes, offset); err != nil {
				pumped <- err
				return
			}
			if n, err := b.Write([][]byte{junk, bufs[0][:offset+sizes[0]]}, offset); n != 2 || err != nil {
				pumped <- fmt.Errorf("write: %d, %v", n, err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		a.Close()
		if err := <-pumped; !errors.Is(err, os.ErrClosed) {
			t.Errorf("pump: %v", err)
		}
	})

	for _, tc := range []struct{ dst, src string }{
		{"10.7.0.1", "10.7.0.2"},
		{"fd00:7::1", "fd00:7::2"},
	} {
		if _, err := from.WriteTo([]byte(tc.dst), &net.UDPAddr{IP: net.ParseIP(tc.dst), Port: 9}); err != nil {
			t.Fatal(err)
		}
		to.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, 64)
		n, addr, err := to.ReadFrom(got)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := netip.AddrFromSlice(addr.(*net.UDPAddr).IP)
		if string(got[:n]) != tc.dst || src.Unmap() != mustIP(tc.src) {
			t.Fatalf("received %q from %s", got[:n], addr)
		}
	}
}

// Events reports the device up once it is told, and only once; Close ends
// a pending Read, closes the events and may be called again.
func TestStackDeviceEventsAndClose(t *testing.T) {
	d := newTestStack(t, "10.7.0.2")
	d.up()
	d.up()
	if ev := <-d.Events(); ev != tun.EventUp {
		t.Fatalf("event %v", ev)
	}
	read := make(chan error, 1)
	go func() {
		_, err := d.Read([][]byte{make([]byte, 1500)}, []int{0}, 0)
		read <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read wait
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("pending read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a pending Read outlived Close")
	}
	if ev, ok := <-d.Events(); ok {
		t.Fatalf("event %v after Close", ev)
	}
	d.up()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read([][]byte{make([]byte, 1500)}, []int{0}, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if n, err := d.Write([][]byte{make([]byte, 20)}, 0); n != 1 || err != nil {
		t.Fatalf("write after Close: %d, %v", n, err)
	}
}

func TestStackDeviceRefusesADuplicateAddress(t *testing.T) {
	_, err := newStackDevice([]netip.Addr{mustIP("10.7.0.2"), mustIP("10.7.0.2")}, defaultMTU)
	if err == nil || err.Error() != "AddProtocolAddress(10.7.0.2): duplicate address" {
		t.Fatalf("got %v", err)
	}
}

func newTestStack(t *testing.T, local ...string) *stackDevice {
	t.Helper()
	var ips []netip.Addr
	for _, l := range local {
		ips = append(ips, mustIP(l))
	}
	d, err := newStackDevice(ips, defaultMTU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
