package shadowsocks

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"switchyard/netx"
	ss "switchyard/protocol/shadowsocks"
)

// maxDatagram is the largest UDP datagram: a sealed packet, either way, must
// fit a buffer of this size.
const maxDatagram = 65535

// packetLink is one UDP session with the server's relay. WritePacket and
// ReadPacket each own a buffer and run on one goroutine each; Close may come
// from a third.
type packetLink struct {
	sock   *net.UDPConn
	server netip.AddrPort
	client *ss.PacketClient
	log    *slog.Logger
	send   []byte // WritePacket's
	recv   []byte // ReadPacket's
	once   sync.Once
	err    error // of Close
}

func newPacketLink(sock *net.UDPConn, server netip.AddrPort, client *ss.PacketClient, log *slog.Logger) *packetLink {
	return &packetLink{
		sock:   sock,
		server: netip.AddrPortFrom(server.Addr().Unmap(), server.Port()),
		client: client,
		log:    log,
		send:   make([]byte, maxDatagram),
		recv:   make([]byte, maxDatagram),
	}
}

// WritePacket seals p to its destination and sends it to the server. A
// packet whose sealed form exceeds the largest datagram fails with the
// client runtime's text.
func (l *packetLink) WritePacket(p []byte, to netx.Addr) error {
	pkt, err := l.client.Seal(l.send, to, p)
	if err != nil {
		return fmt.Errorf("shadowsocks udp: %w", err)
	}
	_, err = l.sock.WriteToUDPAddrPort(pkt, l.server)
	return err
}

// ReadPacket returns the next reply, with the address it came from. A
// datagram that is not from the server, or that does not open — forged,
// corrupted, replayed, stale — is dropped with a debug line: anyone can send
// a datagram to this socket, so one bad datagram does not end the link.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	for {
		n, from, err := l.sock.ReadFromUDPAddrPort(l.recv)
		if err != nil {
			return 0, netx.Addr{}, err
		}
		if from.Addr().Unmap() != l.server.Addr() || from.Port() != l.server.Port() {
			l.log.Debug(fmt.Sprintf("shadowsocks udp: dropping a datagram from %s, which is not the server", from))
			continue
		}
		src, payload, err := l.client.Open(l.recv[:n])
		if err != nil {
			l.log.Debug(fmt.Sprintf("shadowsocks udp: dropping a datagram from the server: %v", err))
			continue
		}
		return copy(p, payload), src, nil
	}
}

// Close closes the socket, which ends a pending ReadPacket.
func (l *packetLink) Close() error {
	l.once.Do(func() { l.err = l.sock.Close() })
	return l.err
}
