package tun_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"switchyard/test/internal/quicecho"
)

// quicEcho is the QUIC echo server on addr in the servers' namespace.
func (l *lab) quicEcho(t *testing.T, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := in(l.server, func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	quicecho.Serve(t, pc)
}

// quicEchoes dials addr from the client's namespace naming serverName and
// echoes one message on a stream.
func (l *lab) quicEchoes(addr, serverName string) error {
	return in(l.client, func() error {
		pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer pc.Close()
		to, _ := net.ResolveUDPAddr("udp", addr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr := &quic.Transport{Conn: pc}
		defer tr.Close()
		conn, err := tr.Dial(ctx, to, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, NextProtos: []string{quicecho.ALPN}},
			&quic.Config{HandshakeIdleTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		defer conn.CloseWithError(0, "")
		s, err := conn.OpenStreamSync(ctx)
		if err != nil {
			return err
		}
		s.Write([]byte("over quic"))
		s.Close()
		got, err := io.ReadAll(s)
		if err != nil || string(got) != "over quic" {
			return errors.Join(errors.New("quic echo "+string(got)), err)
		}
		return nil
	})
}

// A QUIC connection through the TUN works, and its packets are sniffed:
// the server name in its Initial routes it, so a blocked name never
// connects.
func TestQUICThroughTheTUNIsSniffed(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	l := newLab(t)
	l.quicEcho(t, l.web+":4433")
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config("sniff = true\n")+"\n[[rules]]\ndomain = [\"quic.blocked\"]\noutbound = \"block\"\n")
	if err := l.quicEchoes(l.web+":4433", "quic.example"); err != nil {
		t.Fatalf("quic through the TUN: %v\n%s", err, sw.Logs)
	}
	if err := l.quicEchoes(l.web+":4433", "quic.blocked"); err == nil {
		t.Fatal("a QUIC connection whose server name is blocked connected")
	}
}
