package tun

import (
	"context"
	"net/netip"

	"switchyard/netx"
)

// answerDNS answers one hijacked query on a goroutine of its own, at most
// maxDNSInFlight at once (beyond, the query is dropped: the stub retries),
// and writes the reply from the address the query was sent to.
func (in *Inbound) answerDNS(svc DNS, src, dst netip.AddrPort, q []byte) {
	select {
	case in.dns <- struct{}{}:
	default:
		in.log.Debug("tun dns hijack: dropping a query, too many in flight", "source", src)
		return
	}
	if !in.begin() {
		<-in.dns
		return
	}
	q = append([]byte(nil), q...)
	go func() {
		defer in.wg.Done()
		defer func() { <-in.dns }()
		ctx, cancel := context.WithCancel(in.ctx)
		defer cancel()
		r, err := svc.Answer(ctx, q, netx.UDP)
		if err != nil || len(r) > maxUDPPayload {
			return
		}
		buf := make([]byte, packetOffset+udpHeaders+len(r))
		copy(buf[packetOffset+udpHeaders:], r)
		if p, ok := buildUDP(buf, dst, src, len(r), in.cfg.MTU); ok {
			in.writePacket(p)
		}
	}()
}
