package tun

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"switchyard/netx"
)

// handleUDP takes every UDP datagram the stack received (after
// reassembly), on the device reader's goroutine.
func (in *Inbound) handleUDP(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
	// The payload is read in place (datagram).
	payload, ok := pkt.Data().PullUp(pkt.Data().Size())
	if !ok {
		return true
	}
	src, dst := endpoints(id)
	in.datagram(src, dst, payload)
	return true
}

// datagram takes one UDP datagram from the application: a hijacked DNS
// query goes to the DNS service, anything else to its source's
// association. The payload is only read during the call: the
// association's link copies what it keeps, and a hijacked query is copied
// for its goroutine.
func (in *Inbound) datagram(src, dst netip.AddrPort, payload []byte) {
	if a, svc := in.destined(src, dst); svc != nil {
		in.answerDNS(svc, src, dst, payload)
	} else if a != nil {
		a.send(payload, dst)
	}
}

// datagrams is datagram for a run of datagrams from src to dst, in order:
// the association sends them in one go.
func (in *Inbound) datagrams(src, dst netip.AddrPort, ps [][]byte) {
	a, svc := in.destined(src, dst)
	switch {
	case svc != nil:
		for _, p := range ps {
			in.answerDNS(svc, src, dst, p)
		}
	case a != nil:
		a.sendRun(ps, dst)
	}
}

// destined returns where a datagram from src to dst goes: the DNS service
// that answers it when it is a hijacked query, else src's association;
// neither when it is dropped.
func (in *Inbound) destined(src, dst netip.AddrPort) (*association, DNS) {
	if !src.Addr().IsValid() || !dst.Addr().IsValid() || dst.Port() == 0 || local(dst.Addr()) {
		return nil, nil
	}
	if in.cfg.DNSHijack && dst.Port() == 53 {
		if svc := in.currentDNS(); svc != nil {
			return nil, svc
		}
	}
	return in.udp.get(src), nil
}

// local reports whether a datagram to a is for the local network only
// (multicast, broadcast: mDNS, SSDP, DHCP): it is dropped, never routed.
func local(a netip.Addr) bool {
	return a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// associations are the inbound's UDP associations by the application's
// endpoint.
type associations struct {
	in *Inbound

	mu     sync.Mutex // guards m and closed
	m      map[netip.AddrPort]*association
	closed bool
}

func newAssociations(in *Inbound) *associations {
	return &associations{in: in, m: map[netip.AddrPort]*association{}}
}

func (as *associations) len() int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return len(as.m)
}

// get returns src's association, opening it (and evicting the least
// recently used one at the bound) when there is none; nil once closed.
func (as *associations) get(src netip.AddrPort) *association {
	as.mu.Lock()
	if a, ok := as.m[src]; ok {
		as.mu.Unlock()
		return a
	}
	if as.closed {
		as.mu.Unlock()
		return nil
	}
	var evicted *association
	if len(as.m) >= as.in.cfg.MaxAssociations {
		for _, a := range as.m {
			if evicted == nil || a.last.Load() < evicted.last.Load() {
				evicted = a
			}
		}
		delete(as.m, evicted.src)
	}
	flow := netx.Flow{Network: netx.UDP, Src: src, Inbound: as.in.cfg.Tag, SniffPackets: as.in.cfg.Sniff}
	a := &association{as: as, src: src, link: as.in.conn.OpenAssociation(flow)}
	// A link that pushes its replies writes them to the device on the
	// reader that received them, a run of them at once when it can
	// (replies.go): no hand-off to a goroutine of ours.
	p, push := a.link.(netx.PacketPusher)
	if b, ok := a.link.(netx.BatchPusher); ok {
		b.PushBatches(a.newBatch)
		if d, ok := a.link.(netx.PollDriven); ok && as.in.poller != nil {
			d.DriveWith(as.in.poller)
		}
	} else if push {
		p.PushPackets(a.reply)
	} else if !as.in.begin() {
		as.mu.Unlock()
		a.link.Close()
		return nil
	}
	a.touch()
	as.m[src] = a
	as.mu.Unlock()
	if evicted != nil {
		as.in.log.Debug("tun udp association evicted at the bound", "source", evicted.src, "bound", as.in.cfg.MaxAssociations)
		evicted.link.Close()
	}
	if !push {
		go a.replies()
	}
	return a
}

// remove forgets a unless another association has its place already.
func (as *associations) remove(a *association) {
	as.mu.Lock()
	if as.m[a.src] == a {
		delete(as.m, a.src)
	}
	as.mu.Unlock()
}

// sweep ends the associations idle for longer than UDPIdle.
func (as *associations) sweep() {
	defer as.in.wg.Done()
	idle := as.in.cfg.UDPIdle
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-as.in.ctx.Done():
			return
		case <-t.C:
		}
		cut := time.Now().Add(-idle).UnixNano()
		var ended []*association
		as.mu.Lock()
		for src, a := range as.m {
			if a.last.Load() < cut {
				delete(as.m, src)
				ended = append(ended, a)
			}
		}
		as.mu.Unlock()
		for _, a := range ended {
			a.link.Close()
		}
	}
}

// close ends every association.
func (as *associations) close() {
	as.mu.Lock()
	as.closed = true
	all := as.m
	as.m = map[netip.AddrPort]*association{}
	as.mu.Unlock()
	for _, a := range all {
		a.link.Close()
	}
}

// association is the fan-out link of one local endpoint of the
// application.
type association struct {
	as   *associations
	src  netip.AddrPort
	link netx.PacketLink
	last atomic.Int64 // unix nanoseconds of the last packet either way
	sent sentTo
}

func (a *association) touch() { a.last.Store(time.Now().UnixNano()) }

// send routes one datagram toward dst.
func (a *association) send(p []byte, dst netip.AddrPort) {
	a.touch()
	a.sent.note(dst)
	a.link.WritePacket(p, netx.AddrFromAddrPort(dst)) //nolint:errcheck // a closed link drops it; its reader removes it
}

// sendRun routes a run of datagrams toward dst, in order, in one go: the
// fan-out hands each sub-link its part of the run at once.
func (a *association) sendRun(ps [][]byte, dst netip.AddrPort) {
	a.touch()
	a.sent.note(dst)
	netx.WritePackets(a.link, ps, netx.AddrFromAddrPort(dst)) //nolint:errcheck // as send
}

// replies writes every reply of a link that does not push them to the
// application, until the link closes.
func (a *association) replies() {
	in := a.as.in
	defer in.wg.Done()
	defer a.as.remove(a)
	buf := make([]byte, packetOffset+udpHeaders+maxUDPPayload)
	for {
		n, from, err := a.link.ReadPacket(buf[packetOffset+udpHeaders:])
		if err != nil {
			return
		}
		a.write(buf, n, from)
	}
}

// write writes the reply of n bytes at buf[packetOffset+udpHeaders:] to the
// application, from the peer it came from.
func (a *association) write(buf []byte, n int, from netx.Addr) {
	a.touch()
	peer, ok := a.sent.source(from, a.as.in.cfg.IsFake)
	if !ok {
		return
	}
	a.writeFrom(buf, n, peer)
}

// writeFrom writes the reply of n bytes at buf[packetOffset+udpHeaders:]
// to the application, from peer.
func (a *association) writeFrom(buf []byte, n int, peer netip.AddrPort) {
	in := a.as.in
	if p, ok := buildUDP(buf, peer, a.src, n, in.cfg.MTU); ok {
		in.writePacket(p)
	}
}

// sentTo remembers the latest destinations an association sent to, so
// that a reply attributed to a name (or to the real address behind a fake
// one) comes from the address the application sent to.
type sentTo struct {
	mu   sync.Mutex
	dsts [maxRemembered]netip.AddrPort
	next int
}

// maxRemembered bounds the destinations one association remembers.
const maxRemembered = 16

func (s *sentTo) note(dst netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dsts {
		if d == dst {
			return
		}
	}
	s.dsts[s.next] = dst
	s.next = (s.next + 1) % maxRemembered
}

// source is the address a reply from from is written from. An address
// the association sent to is its own source, and so is any other address,
// unless a fake IP (isFake) of the same port was sent to: the reply is the
// real address behind it answering, and comes from the fake IP the
// application knows. A name comes from the latest destination of its port
// that was sent to; a name of no such port is dropped.
func (s *sentTo) source(from netx.Addr, isFake func(netip.Addr) bool) (netip.AddrPort, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ap := netip.AddrPortFrom(from.IP.Unmap(), from.Port)
	if from.Name == "" {
		for _, d := range s.dsts {
			if d == ap {
				return ap, true
			}
		}
	}
	var any, fake netip.AddrPort
	for i := range maxRemembered {
		d := s.dsts[(s.next-1-i+2*maxRemembered)%maxRemembered]
		if !d.IsValid() || d.Port() != from.Port {
			continue
		}
		if !any.IsValid() {
			any = d
		}
		if !fake.IsValid() && isFake != nil && isFake(d.Addr()) {
			fake = d
		}
	}
	switch {
	case fake.IsValid():
		return fake, true
	case from.Name == "":
		return ap, ap.Addr().IsValid()
	default:
		return any, any.IsValid()
	}
}
