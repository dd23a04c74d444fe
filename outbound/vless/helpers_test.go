package vless

import (
	"bytes"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/mux"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testUUID = "b831381d-6324-4d53-ad4f-8cda48b30811"

func newVLESS(t *testing.T, server, packetEncoding string) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "v", Type: "vless", Server: server, UUID: testUUID, PacketEncoding: packetEncoding, UDP: true}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	return o
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

// errDeadline is what a read cut by its deadline returns.
var errDeadline = os.ErrDeadlineExceeded
