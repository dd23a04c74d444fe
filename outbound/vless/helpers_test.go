package vless

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/protocol/mux"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testUUID = "b831381d-6324-4d53-ad4f-8cda48b30811"

// serve runs handle on every connection accepted on a loopback TCP
// listener until the test ends, and returns the listener's address.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func newVLESS(t *testing.T, server, packetEncoding string) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "v", Type: "vless", Server: server, UUID: testUUID, PacketEncoding: packetEncoding, UDP: true}, deps())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func deps() outbound.Deps {
	return outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, time.Second), Servers: netx.SystemResolver{}}
}

// readRequest reads a request header and checks its version, UUID, addons
// and command; it returns the address bytes (none for the Mux command).
func readRequest(t *testing.T, c net.Conn, cmd byte) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	head := make([]byte, 1+16+1+1)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Errorf("reading the request: %v", err)
		return nil
	}
	id, _ := codec.ParseUUID(testUUID)
	if head[0] != 0 || !bytes.Equal(head[1:17], id[:]) || head[17] != 0 || head[18] != cmd {
		t.Errorf("request head %x", head)
		return nil
	}
	if cmd == codec.CmdMux {
		return nil
	}
	addr := make([]byte, mux.MaxAddrLen)
	have := 0
	for {
		n, err := mux.AddrLen(addr[:have])
		if err != nil {
			t.Errorf("request address: %v", err)
			return nil
		}
		if n <= have {
			return addr[:n]
		}
		if _, err := io.ReadFull(c, addr[have:n]); err != nil {
			t.Errorf("reading the address: %v", err)
			return nil
		}
		have = n
	}
}

// frames reads the client's Mux.Cool frames from c and calls fn with each
// until c ends or fn returns false.
func frames(c net.Conn, fn func(mux.Frame) bool) error {
	var p mux.Parser
	buf := make([]byte, 0, 1<<17)
	chunk := make([]byte, 4096)
	for {
		for {
			n, err := mux.FrameLen(buf)
			if err != nil {
				return err
			}
			if n > len(buf) {
				break
			}
			f, err := p.Parse(buf[:n])
			if err != nil {
				return err
			}
			f.Data = bytes.Clone(f.Data)
			if !fn(f) {
				return nil
			}
			buf = buf[:copy(buf, buf[n:])]
		}
		n, err := c.Read(chunk)
		if err != nil {
			return err
		}
		buf = append(buf, chunk[:n]...)
	}
}

// errDeadline is what a read cut by its deadline returns.
var errDeadline = os.ErrDeadlineExceeded
