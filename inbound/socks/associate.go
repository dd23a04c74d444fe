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

// An association costs, while idle, its sockets and at most two goroutines
// of its own: the handler's, which reads the client's datagrams, and one per
// sub-link of the connector's link, which reads that sub-link and writes
// each reply to the client itself (netx.PacketPusher). The control
// connection is watched for its end without a goroutine where the platform
// allows (a shared hang-up watcher, see hangups); elsewhere one goroutine
// waits on it. Buffers are taken from netx's pools only while a datagram is
// in flight, so an idle association holds none.

// association is one UDP ASSOCIATE: a relay socket for the client's
// datagrams, the connector's link, and the control connection whose end ends
// it.
type association struct {
	ctrl     net.Conn
	pc       *net.UDPConn
	waiter   *netx.DatagramWaiter // on pc
	link     netx.PacketLink
	clientIP netip.Addr
	// named is an address the request named that is neither the control
	// connection's IP nor all zeros: until the client is known, a datagram
	// from exactly there is the client's too (see ownerOf).
	named netip.AddrPort
	// client is the client's datagram address: the one its request named,
	// or, when that named port zero, the one learned from its first
	// datagram; nil until then.
	client atomic.Pointer[netip.AddrPort]
	// strangers counts the datagrams dropped for not coming from the
	// client.
	strangers atomic.Uint64
	unwatch   func() // stops the hang-up watch; nil without one
	log       *slog.Logger
	once      sync.Once
}

// associate serves a UDP ASSOCIATE until the control connection ends.
// declared is the address the request names: where the client will send
// its datagrams from (RFC 1928), or all zeros when it does not know.
func (s *Server) associate(c net.Conn, flow netx.Flow, declared netx.Addr, log *slog.Logger) {
	if !s.assocs.acquire() {
		s.assocs.refused(log)
		writeReply(c, socks5.ReplyGeneralFailure, netx.Addr{})
		return
	}
	defer s.assocs.release()
	local := serve.AddrPort(c.LocalAddr())
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local.Addr(), 0)))
	if err != nil {
		log.Debug("socks udp associate failed", "error", err)
		writeReply(c, socks5.ReplyGeneralFailure, netx.Addr{})
		return
	}
	waiter, err := netx.NewDatagramWaiter(pc)
	if err != nil {
		pc.Close()
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
		waiter:   waiter,
		link:     s.conn.OpenAssociation(flow),
		clientIP: flow.Src.Addr().WithZone(""),
		log:      log.With("relay", bound),
	}
	owner, ok, other := ownerOf(declared, a.clientIP)
	a.named = other
	if ok {
		a.client.Store(&owner)
	}
	var wg sync.WaitGroup
	if p, ok := a.link.(netx.PacketPusher); ok {
		p.PushPackets(a.reply)
	} else {
		wg.Go(a.toClient)
	}
	if !s.assocs.add(a) {
		a.stop()
		wg.Wait()
		return
	}
	defer s.assocs.remove(a)
	if err := writeReply(c, socks5.ReplySucceeded, bound); err != nil {
		a.stop()
		wg.Wait()
		return
	}
	c.SetDeadline(time.Time{})
	if a.unwatch = s.assocs.watch(c, a.hangUp); a.unwatch == nil {
		wg.Go(a.drainControl)
	}
	a.log.Debug("socks udp association opened", "client", a.owner())
	a.fromClient()
	a.stop()
	wg.Wait()
	a.log.Debug("socks udp association closed", "dropped_not_from_client", a.strangers.Load())
}

// ownerOf reads the address a UDP ASSOCIATE request names, which RFC 1928
// has the client name as the one it will send from. owner, with ok, is the
// only address the association then accepts: the named port on the control
// connection's IP, when the request names that IP or all zeros. Otherwise
// the association locks to its first datagram from the control
// connection's IP (or, as other, from exactly the named address when it is
// another IP): when the request named port zero (the client did not know
// its port yet), a name, or another IP. Clients in the field, sing-box's and
// mihomo's SOCKS5 outbounds among them, name their first destination there
// rather than their own address; holding them to it would drop all their
// datagrams.
func ownerOf(declared netx.Addr, ctrlIP netip.Addr) (owner netip.AddrPort, ok bool, other netip.AddrPort) {
	if declared.Port == 0 || !declared.IP.IsValid() {
		return netip.AddrPort{}, false, netip.AddrPort{}
	}
	ip := declared.IP.Unmap().WithZone("")
	if !ip.IsUnspecified() && ip != ctrlIP.Unmap().WithZone("") {
		return netip.AddrPort{}, false, netip.AddrPortFrom(ip, declared.Port)
	}
	return netip.AddrPortFrom(ctrlIP, declared.Port), true, netip.AddrPort{}
}

// owner is the client's datagram address as far as it is known, for logs.
func (a *association) owner() string {
	if cl := a.client.Load(); cl != nil {
		return cl.String()
	}
	return a.clientIP.String() + ":(first datagram)"
}

// hangUp is called once the control connection ended: closing the relay
// socket wakes fromClient, which ends the association.
func (a *association) hangUp() { a.pc.Close() }

// drainControl reads the control connection, discarding what it carries,
// until it ends: EOF, an error, or its close by Server.Close or stop. It
// stands in for the hang-up watcher where there is none.
func (a *association) drainControl() {
	var sink [256]byte
	for {
		if _, err := a.ctrl.Read(sink[:]); err != nil {
			a.hangUp()
			return
		}
	}
}

// stop ends the association. It is called by the handler once fromClient
// returned, and by toClient when it fails, never by a sub-link's reader.
func (a *association) stop() {
	a.once.Do(func() {
		if a.unwatch != nil {
			a.unwatch()
		}
		a.ctrl.Close()
		a.pc.Close()
		a.link.Close()
	})
}

// fromClient reads the client's datagrams, on the handler's goroutine, and
// sends each payload on the link to the destination its header names.
// Datagrams from anything but the client are dropped. It waits for each
// datagram without a buffer; the wait takes the datagram into a pooled one.
func (a *association) fromClient() {
	var parser socks5.UDPParser
	for {
		if _, err := a.waiter.Wait(); err != nil {
			a.readFailed(err)
			return
		}
		bp, from, ok := a.waiter.TakeBuf()
		if !ok {
			continue // a wait without error always holds one
		}
		a.forward(&parser, *bp, from)
		netx.PutBuf(bp)
	}
}

func (a *association) readFailed(err error) {
	if !errors.Is(err, net.ErrClosed) {
		a.log.Debug("socks udp relay read failed", "error", err)
	}
}

// forward sends one datagram of the client's on the link.
func (a *association) forward(parser *socks5.UDPParser, b []byte, from netip.AddrPort) {
	from = netip.AddrPortFrom(from.Addr().Unmap().WithZone(""), from.Port())
	if !a.fromTheClient(from) {
		a.strangers.Add(1)
		a.log.Debug("socks udp datagram dropped", "from", from, "client", a.owner(), "error", "not from the client")
		return
	}
	dst, payload, err := parser.Parse(b)
	if err != nil {
		a.log.Debug("socks udp datagram dropped", "error", err)
		return
	}
	if err := a.link.WritePacket(payload, dst); err != nil {
		a.log.Debug("socks udp datagram not sent", "destination", dst, "error", err)
	}
}

// fromTheClient checks a datagram's source: the client's address once it
// is known; before that, the control connection's IP (or the other address
// the request named), learning the client's address from its first
// datagram.
func (a *association) fromTheClient(from netip.AddrPort) bool {
	if cl := a.client.Load(); cl != nil {
		return *cl == from
	}
	if from.Addr() != a.clientIP && from != a.named {
		return false
	}
	learned := new(netip.AddrPort)
	*learned = from
	if a.client.CompareAndSwap(nil, learned) {
		return true
	}
	return *a.client.Load() == from
}

// reply sends one reply to the client with a SOCKS5 header naming the peer
// it came from. It runs on the goroutine that received it (a sub-link's
// reader, or toClient). A reply that arrives before the client is known
// has nowhere to go and is dropped.
func (a *association) reply(p []byte, from netx.Addr) {
	client := a.client.Load()
	if client == nil {
		a.log.Debug("socks udp reply dropped", "from", from, "error", "the client has sent no datagram yet")
		return
	}
	bp := netx.GetBuf(socks5.MaxUDPHeaderLen + len(p))
	defer netx.PutBuf(bp)
	pkt := socks5.AppendUDP((*bp)[:0], from, p)
	if len(pkt) == 0 {
		a.log.Debug("socks udp reply dropped", "from", from, "error", "the source cannot be written in a SOCKS5 header")
		return
	}
	if _, err := a.pc.WriteToUDPAddrPort(pkt, *client); err != nil && !errors.Is(err, net.ErrClosed) {
		a.log.Debug("socks udp reply not sent", "error", err)
	}
}

// toClient reads replies from a link that cannot push them and sends each
// to the client.
func (a *association) toClient() {
	defer a.hangUp()
	bp := netx.GetBuf(netx.MaxBuf)
	defer netx.PutBuf(bp)
	for {
		n, from, err := a.link.ReadPacket(*bp)
		if err != nil {
			return
		}
		a.reply((*bp)[:n], from)
	}
}
