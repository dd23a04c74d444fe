package tun

import (
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"switchyard/inbound/internal/serve"
	"switchyard/netx"
	"switchyard/relay"
)

// endpoints are the application's end (src) and the destination (dst) of
// a packet or connection the stack took: gVisor names the destination the
// local end.
func endpoints(id stack.TransportEndpointID) (src, dst netip.AddrPort) {
	return addrPort(id.RemoteAddress, id.RemotePort), addrPort(id.LocalAddress, id.LocalPort)
}

func addrPort(a tcpip.Address, port uint16) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return netip.AddrPortFrom(ip.Unmap(), port)
}

// handleTCP serves one connection request; the forwarder runs it on a
// goroutine of its own, which the inbound counts.
func (in *Inbound) handleTCP(r *tcp.ForwarderRequest) {
	if !in.begin() {
		r.Complete(true)
		return
	}
	defer in.wg.Done()
	src, dst := endpoints(r.ID())
	if in.cfg.DNSHijack && dst.Port() == 53 {
		if svc := in.currentDNS(); svc != nil {
			c := in.accept(r)
			if c == nil {
				return
			}
			relay.Pipe(in.ctx, c, svc.Stream(), 0)
			return
		}
	}
	flow := netx.Flow{Network: netx.TCP, Dst: netx.AddrFromAddrPort(dst), Src: src, Inbound: in.cfg.Tag}
	if in.cfg.Sniff && (in.cfg.IsFake == nil || !in.cfg.IsFake(dst.Addr())) {
		in.connectSniffed(r, flow)
		return
	}
	up, err := in.conn.ConnectStream(in.ctx, flow)
	if err != nil {
		r.Complete(true)
		in.log.Debug("tun connect failed", "source", src, "destination", dst, "error", err)
		return
	}
	c := in.accept(r)
	if c == nil {
		up.Close()
		return
	}
	relay.Pipe(in.ctx, c, up, 0)
}

// appConn is the application's connection, its endpoint at hand for a
// reset.
type appConn struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

// accept completes the application's handshake; nil when it could not.
func (in *Inbound) accept(r *tcp.ForwarderRequest) *appConn {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		return nil
	}
	r.Complete(false)
	return &appConn{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep}
}

// connectSniffed completes the handshake, reads the application's first
// bytes for the name they carry and only then routes the flow; a failed
// dial resets the connection.
func (in *Inbound) connectSniffed(r *tcp.ForwarderRequest, flow netx.Flow) {
	c := in.accept(r)
	if c == nil {
		return
	}
	first, err := serve.ReadFirst(c, nil, serve.SniffWait)
	if err != nil {
		c.Close()
		return
	}
	defer first.Release()
	flow.Protocol, flow.Sniffed = first.Protocol, first.Domain
	up, err := in.conn.ConnectStream(in.ctx, flow)
	if err != nil {
		in.log.Debug("tun connect failed", "source", flow.Src, "destination", flow.Dst, "sniffed", flow.Sniffed, "error", err)
		reset(c)
		return
	}
	if b := first.Bytes(); len(b) > 0 {
		if _, err := up.Write(b); err != nil {
			up.Close()
			reset(c)
			return
		}
	}
	first.Release()
	relay.Pipe(in.ctx, c, up, 0)
}

// reset aborts c with a RST rather than a FIN: the destination refused.
func reset(c *appConn) {
	c.ep.Abort()
	c.Close()
}

// currentDNS is the DNS service in force, or nil.
func (in *Inbound) currentDNS() DNS {
	if in.cfg.DNS == nil {
		return nil
	}
	return in.cfg.DNS()
}
