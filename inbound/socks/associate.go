package socks

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// maxDatagram is the largest UDP payload a socket can carry.
const maxDatagram = 65535

// udpPool holds the buffers of associations: one datagram and the largest
// SOCKS5 header in front of it.
var udpPool = sync.Pool{New: func() any {
	b := make([]byte, maxDatagram+socks5.MaxUDPHeaderLen)
	return &b
}}

// association is one UDP ASSOCIATE: a relay socket for the client's
// datagrams, the connector's link, and the control connection whose end ends
// it.
type association struct {
	ctrl     net.Conn
	pc       *net.UDPConn
	link     netx.PacketLink
	clientIP netip.Addr
	// client is the client's datagram address, learned from its first
	// datagram; nil until then.
	client atomic.Pointer[netip.AddrPort]
	log    *slog.Logger
	once   sync.Once
}

// associate serves a UDP ASSOCIATE until the control connection ends.
func (s *Server) associate(c net.Conn, flow netx.Flow, log *slog.Logger) {
	local := serve.AddrPort(c.LocalAddr())
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local.Addr(), 0)))
	if err != nil {
		log.Debug("socks udp associate failed", "error", err)
		writeReply(c, socks5.ReplyGeneralFailure, netx.Addr{})
		return
	}
	relayAddr := serve.AddrPort(pc.LocalAddr())
	bound := netx.AddrFromAddrPort(netip.AddrPortFrom(relayAddr.Addr().WithZone(""), relayAddr.Port()))
	flow.SniffPackets = s.cfg.Sniff
	a := &association{
		ctrl:     c,
		pc:       pc,
		link:     s.conn.OpenAssociation(flow),
		clientIP: flow.Src.Addr().WithZone(""),
		log:      log.With("relay", bound),
	}
	if err := writeReply(c, socks5.ReplySucceeded, bound); err != nil {
		a.stop()
		return
	}
	c.SetDeadline(time.Time{})
	a.log.Debug("socks udp association opened")
	var wg sync.WaitGroup
	wg.Go(a.fromClient)
	wg.Go(a.toClient)
	a.drainControl()
	a.stop()
	wg.Wait()
	a.log.Debug("socks udp association closed")
}

// drainControl reads the control connection, discarding what it carries,
// until it ends: EOF, an error, or its close by Server.Close or stop.
func (a *association) drainControl() {
	var sink [256]byte
	for {
		if _, err := a.ctrl.Read(sink[:]); err != nil {
			return
		}
	}
}

// stop ends the association: each of its goroutines calls it when it ends,
// so that one ending ends the others.
func (a *association) stop() {
	a.once.Do(func() {
		a.ctrl.Close()
		a.pc.Close()
		a.link.Close()
	})
}

// fromClient reads the client's datagrams and sends each payload on the link
// to the destination its header names. Datagrams from anything but the
// client are dropped: from the control connection's IP only, and once the
// first one is in, from its port only.
func (a *association) fromClient() {
	defer a.stop()
	bp := udpPool.Get().(*[]byte)
	defer udpPool.Put(bp)
	buf := *bp
	var parser socks5.UDPParser
	for {
		n, from, err := a.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				a.log.Debug("socks udp relay read failed", "error", err)
			}
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap().WithZone(""), from.Port())
		if !a.fromTheClient(from) {
			a.log.Debug("socks udp datagram dropped", "from", from, "error", "not from the client")
			continue
		}
		dst, payload, err := parser.Parse(buf[:n])
		if err != nil {
			a.log.Debug("socks udp datagram dropped", "error", err)
			continue
		}
		if err := a.link.WritePacket(payload, dst); err != nil {
			a.log.Debug("socks udp datagram not sent", "destination", dst, "error", err)
		}
	}
}

// fromTheClient checks a datagram's source, learning the client's port from
// its first datagram.
func (a *association) fromTheClient(from netip.AddrPort) bool {
	if from.Addr() != a.clientIP {
		return false
	}
	if cl := a.client.Load(); cl != nil {
		return *cl == from
	}
	learned := new(netip.AddrPort)
	*learned = from
	if a.client.CompareAndSwap(nil, learned) {
		return true
	}
	return *a.client.Load() == from
}

// toClient reads replies from the link and sends each to the client with a
// SOCKS5 header naming the peer it came from. Replies that arrive before the
// client's first datagram have nowhere to go and are dropped.
func (a *association) toClient() {
	defer a.stop()
	inp := udpPool.Get().(*[]byte)
	defer udpPool.Put(inp)
	outp := udpPool.Get().(*[]byte)
	defer udpPool.Put(outp)
	in, out := (*inp)[:maxDatagram], *outp
	for {
		n, from, err := a.link.ReadPacket(in)
		if err != nil {
			return
		}
		client := a.client.Load()
		if client == nil {
			a.log.Debug("socks udp reply dropped", "from", from, "error", "the client has sent no datagram yet")
			continue
		}
		pkt := socks5.AppendUDP(out[:0], from, in[:n])
		if len(pkt) == 0 {
			a.log.Debug("socks udp reply dropped", "from", from, "error", "the source cannot be written in a SOCKS5 header")
			continue
		}
		if _, err := a.pc.WriteToUDPAddrPort(pkt, *client); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Debug("socks udp reply not sent", "error", err)
		}
	}
}
