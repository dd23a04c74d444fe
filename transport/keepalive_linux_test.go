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
	for _, tc := range []struct {
		name string
		o    spec.Outbound
	}{
		{"tcp", spec.Outbound{Server: plain.String()}},
		{"tls", spec.Outbound{Server: tlsServer.String(), TLS: &spec.TLS{ServerName: serverName, CAFile: pki.caFile}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dial(t, tc.o, deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.o.TLS != nil {
				tc, ok := c.(*tls.Conn)
				if !ok {
					t.Fatalf("TLS transport gave a %T", c)
				}
				c = tc.NetConn()
			}
			raw, err := c.(*net.TCPConn).SyscallConn()
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
