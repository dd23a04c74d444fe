package transport

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"

	"switchyard/spec"
)

// Every proxy upstream carries the keepalive schedule, under TLS too.
func TestDialSetsTheKeepaliveSchedule(t *testing.T) {
	pki := newPKI(t)
	plain := accept(t, echo)
	tlsServer := serveTLS(t, pki.serverConfig(tls.VersionTLS12, tls.VersionTLS13))
	var seen wsRequests
	wsServer := wsEchoServer(t, nil, "", &seen)
	grpcServer := newGRPCServer(t, pki, []string{"h2"}, grpcEcho(false, "0"))
	withTLS := &spec.TLS{ServerName: serverName, CAFile: pki.caFile}
	for _, tc := range []struct {
		name string
		o    spec.Outbound
	}{
		{"tcp", spec.Outbound{Server: plain.String()}},
		{"tls", spec.Outbound{Server: tlsServer.String(), TLS: withTLS}},
		{"ws", spec.Outbound{Server: wsServer.String(), Transport: spec.Transport{Type: "ws"}}},
		{"grpc", grpcOutbound(pki, grpcServer.addr, spec.Transport{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDialer(t, tc.o)
			c := dialCtx(t, d)
			defer c.Close()
			tcp := tcpUnder(c)
			if tcp == nil {
				t.Fatalf("no TCP connection under a %T", c)
			}
			raw, err := tcp.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			for _, opt := range []struct {
				name         string
				level, which int
				want         int
			}{
				{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
				{"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 120},
				{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 30},
				{"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, 3},
			} {
				var got int
				var gerr error
				if err := raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), opt.level, opt.which) }); err != nil {
					t.Fatal(err)
				}
				if gerr != nil || got != opt.want {
					t.Errorf("%s = %d (%v), want %d", opt.name, got, gerr, opt.want)
				}
			}
		})
	}
}

// tcpUnder is the proxy upstream socket under a transport's stream.
func tcpUnder(c net.Conn) *net.TCPConn {
	switch x := c.(type) {
	case *net.TCPConn:
		return x
	case *tls.Conn:
		return tcpUnder(x.NetConn())
	case *TLSStream:
		return tcpUnder(x.NetConn())
	case *wsConn:
		return tcpUnder(x.Conn)
	case *grpcConn:
		return tcpUnder(x.s.c.raw)
	}
	return nil
}
