// Package shadowsocks is the Shadowsocks client outbound, AEAD (SIP004) and
// 2022 (SIP022): TCP flows over the transport to the server, and UDP over a
// socket of its own toward the server's UDP relay, each packet naming its
// own destination. Over a transport other than tcp (ws, httpupgrade, grpc)
// it carries no UDP.
package shadowsocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"switchyard/netx"
	"switchyard/outbound"
	ss "switchyard/protocol/shadowsocks"
	"switchyard/spec"
	"switchyard/transport"
)

// Outbound is a Shadowsocks client.
type Outbound struct {
	tag      string
	cipher   *ss.Cipher // derived once, shared by every flow
	dialer   *transport.Dialer
	strategy netx.Strategy // orders the server's addresses for UDP
	resolver netx.Resolver // resolves the server for UDP
	sockets  *netx.Dialer  // binds UDP sockets under the socket policy
	log      *slog.Logger
	// noUDP, when set, is the refusal of every datagram link: over a
	// transport other than tcp, datagrams sent to the server's UDP relay
	// would bypass the transport the server is reached through.
	noUDP error
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds a Shadowsocks outbound: it checks the method, derives the keys
// and builds the transport dialer. It opens no socket.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	c, err := ss.New(o.Method, o.Password)
	if err != nil {
		return nil, err
	}
	d, err := transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout})
	if err != nil {
		return nil, err
	}
	strategy, err := netx.ParseStrategy(o.AddressFamily)
	if err != nil {
		return nil, err
	}
	ob := &Outbound{tag: o.Tag, cipher: c, dialer: d, strategy: strategy, resolver: deps.Servers, sockets: deps.Dialer, log: deps.Logger}
	if ob.resolver == nil {
		ob.resolver = netx.SystemResolver{}
	}
	if ob.log == nil {
		ob.log = slog.New(slog.DiscardHandler)
	}
	if t := o.Transport.Type; t != "" && t != "tcp" {
		ob.noUDP = &outbound.NoUDPError{What: fmt.Sprintf("shadowsocks[%s] over a %s transport", o.Tag, t)}
	}
	return ob, nil
}

// CarriesUDP reports whether datagrams go to the server's UDP relay: over
// the tcp transport only (outbound.Networks). Over ws, httpupgrade or grpc
// DialPacket refuses with ErrNoUDP.
func (o *Outbound) CarriesUDP() bool { return o.noUDP == nil }

// ProbeTarget is the proxy server, which a health probe connects to.
func (o *Outbound) ProbeTarget() netx.Addr { return o.dialer.ProbeServer() }

// DialStream connects to the server, sends the request naming f.Dst and
// returns once it is written. The server's salt and response header are read
// with the first Read.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	up, err := o.dialer.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial shadowsocks[%s]: %w", o.tag, err)
	}
	c, err := o.handshake(ctx, up, f.Dst)
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("dial shadowsocks[%s]: %w", o.tag, err)
	}
	return c, nil
}

// handshake writes the request on its own, under ctx.
func (o *Outbound) handshake(ctx context.Context, up net.Conn, dst netx.Addr) (*stream, error) {
	stage := getStage(startBuf)
	defer putStage(stage) // the write below is over when handshake returns
	req, sealer, resp, err := o.cipher.Request(*stage, dst)
	if err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseHandshake)
	err = netx.Within(ctx, up, func() error {
		_, err := up.Write(req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("send the request: %w", err)
	}
	return &stream{Conn: up, up: sealer, size: o.cipher.Method().BufSize(), down: resp.NewReader(up, make([]byte, startBuf))}, nil
}

// DialPacket binds a UDP socket of the family of the server's first usable
// address; every packet is sealed to its own destination and sent to the
// server's UDP relay. Over a transport other than tcp it refuses (ErrNoUDP)
// before it resolves or binds anything.
func (o *Outbound) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	if o.noUDP != nil {
		return nil, o.noUDP
	}
	addrs, err := netx.Resolve(ctx, o.dialer.Server(), o.strategy, o.resolver)
	if err != nil {
		return nil, fmt.Errorf("shadowsocks[%s] udp: %w", o.tag, err)
	}
	client, err := o.cipher.NewPacketClient()
	if err != nil {
		return nil, fmt.Errorf("shadowsocks[%s] udp: %w", o.tag, err)
	}
	var errs []error
	for _, server := range addrs {
		sock, err := o.sockets.ListenUDP(ctx, netx.FamilyOf(server.Addr()))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", server, err))
			continue
		}
		l, err := newPacketLink(sock, server, client, o.log)
		if err != nil {
			sock.Close()
			return nil, fmt.Errorf("shadowsocks[%s] udp: %w", o.tag, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("shadowsocks[%s] udp: no local socket for the server: %w", o.tag, errors.Join(errs...))
}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.dialer.Close() }
