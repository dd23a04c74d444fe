package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"switchyard/route/sniff/snifftest"
	"switchyard/test/internal/quicecho"
	"switchyard/test/socksclient"
)

// quicEcho is the QUIC echo server on loopback.
func quicEcho(t *testing.T) *net.UDPAddr {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quicecho.Serve(t, pc)
	return pc.LocalAddr().(*net.UDPAddr)
}

// quicThrough dials server through a SOCKS5 association on proxy with
// quic-go, naming serverName, and echoes one message on a stream.
func quicThrough(t *testing.T, proxy string, server *net.UDPAddr, serverName string, version quic.Version) error {
	t.Helper()
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true") // the association is no *net.UDPConn
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	pc := a.PacketConn()
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, pc, server, &tls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true,
		NextProtos:         []string{quicecho.ALPN},
	}, &quic.Config{Versions: []quic.Version{version}, HandshakeIdleTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	msg := []byte("over quic, through switchyard")
	if _, err := s.Write(msg); err != nil {
		return err
	}
	s.Close()
	got, err := io.ReadAll(s)
	if err != nil {
		return err
	}
	if string(got) != string(msg) {
		return fmt.Errorf("echo %q", got)
	}
	return nil
}

const sniffingSocks = `
[log]
level = "debug"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
udp = true
sniff = %v
`

// A real QUIC client's packets, through a SOCKS5 association to a server
// named by its IP, are sniffed and routed by protocol and by the SNI of
// their ClientHello, in QUIC v1 and v2: every packet of the connection takes
// the route its Initial took.
func TestQUICSniffRoutesARealClient(t *testing.T) {
	server := quicEcho(t)
	for _, version := range []quic.Version{quic.Version1, quic.Version2} {
		t.Run(version.String(), func(t *testing.T) {
			byProtocol := start(t, fmt.Sprintf(sniffingSocks, true)+`
[[rules]]
protocol = ["quic"]
outbound = "block"
`)
			if err := quicThrough(t, byProtocol.addr("socks-in"), server, "quic.example", version); err == nil {
				t.Fatal("a QUIC connection passed a protocol = [\"quic\"] block rule")
			}

			byName := start(t, fmt.Sprintf(sniffingSocks, true)+`
[[rules]]
domain = ["quic.example"]
outbound = "block"
`)
			if err := quicThrough(t, byName.addr("socks-in"), server, "quic.example", version); err == nil {
				t.Fatal("a QUIC connection to a blocked SNI completed")
			}
			// The same server under another name goes through: every
			// packet of the connection, not only its Initial, reaches it.
			if err := quicThrough(t, byName.addr("socks-in"), server, "other.example", version); err != nil {
				t.Fatalf("QUIC to an allowed name: %v\n%s", err, byName.logs)
			}

			// Without sniff on the inbound the rule can never match.
			unsniffed := start(t, fmt.Sprintf(sniffingSocks, false)+`
[[rules]]
protocol = ["quic"]
outbound = "block"
`)
			if err := quicThrough(t, unsniffed.addr("socks-in"), server, "quic.example", version); err != nil {
				t.Fatalf("QUIC through an inbound that does not sniff: %v", err)
			}
		})
	}
}

// A DNS query through an association, to a port that is not 53, routes as
// protocol dns; other datagrams to the same peer do not.
func TestDNSSniffOnAnyPort(t *testing.T) {
	peer := udpEcho(t, "r:")
	p := start(t, fmt.Sprintf(sniffingSocks, true)+`
[[rules]]
protocol = ["dns"]
outbound = "block"
`)
	a, err := socksclient.Associate(p.addr("socks-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Send(peer.LocalAddr().String(), []byte("not a query"))
	if _, payload, ok := a.Recv(2 * time.Second); !ok || string(payload) != "r:not a query" {
		t.Fatalf("a datagram that is not DNS: %q %v", payload, ok)
	}
	a.Send(peer.LocalAddr().String(), snifftest.DNSQuery("www.example.com", 1, 1, true))
	if _, payload, ok := a.Recv(time.Second); ok {
		t.Fatalf("a DNS query passed a protocol = [\"dns\"] block rule: %q", payload)
	}
}
