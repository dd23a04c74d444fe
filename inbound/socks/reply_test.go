package socks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/outbound"
	outsocks "switchyard/outbound/socks"
	"switchyard/protocol/socks5"
)

func TestReplyFor(t *testing.T) {
	opErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	tests := []struct {
		name string
		err  error
		want byte
	}{
		{"blocked by rule", fmt.Errorf("block[block]: %w", outbound.ErrBlocked), socks5.ReplyNotAllowed},
		{"command", fmt.Errorf("request: %w", socks5.ErrCommandNotSupported), socks5.ReplyCommandNotSupported},
		{"address type", fmt.Errorf("request: %w", socks5.ErrAddressTypeNotSupported), socks5.ReplyAddressTypeNotSupported},
		{"refused", opErr(syscall.ECONNREFUSED), socks5.ReplyConnectionRefused},
		{"refused, wrapped", fmt.Errorf("direct: %w", opErr(syscall.ECONNREFUSED)), socks5.ReplyConnectionRefused},
		{"refused by a socks upstream", fmt.Errorf("socks[up]: %w", &outsocks.RejectedError{Status: socks5.ReplyHostUnreachable}), socks5.ReplyConnectionRefused},
		{"network unreachable", opErr(syscall.ENETUNREACH), socks5.ReplyNetworkUnreachable},
		{"host unreachable", opErr(syscall.EHOSTUNREACH), socks5.ReplyHostUnreachable},
		{"no such host", &net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}, socks5.ReplyHostUnreachable},
		{"connect timeout", opErr(syscall.ETIMEDOUT), socks5.ReplyHostUnreachable},
		{"deadline", fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), socks5.ReplyHostUnreachable},
		{"context deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), socks5.ReplyHostUnreachable},
		// A text that says "connection refused" is not a refusal: only kinds
		// are matched.
		{"refusal in text only", errors.New("upstream said: dial 10.0.0.1:80: connection refused"), socks5.ReplyGeneralFailure},
		{"other", errors.New("handshake failed"), socks5.ReplyGeneralFailure},
		{"reset", opErr(syscall.ECONNRESET), socks5.ReplyGeneralFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replyFor(tt.err); got != tt.want {
				t.Fatalf("replyFor(%v) = %#x (%s), want %#x (%s)", tt.err, got, socks5.ReplyText(got), tt.want, socks5.ReplyText(tt.want))
			}
		})
	}
}

// A SOCKS5 upstream's failure reply reaches the client as a refused
// connection.
func TestAnUpstreamRefusalIsAnsweredRefused(t *testing.T) {
	conn := inboundtest.NewConnector(t)
	conn.Err = fmt.Errorf("socks[up]: %w", &outsocks.RejectedError{Status: socks5.ReplyGeneralFailure})
	proxy := inboundtest.Serve(t, New(Config{Tag: "s"}, conn, inboundtest.Logger(t)))
	c := dial(t, proxy, "", "")
	if code, _ := request(t, c, socks5.CmdConnect, netx.DomainAddr("example.com", 443)); code != socks5.ReplyConnectionRefused {
		t.Fatalf("reply %#x (%s), want 0x05", code, socks5.ReplyText(code))
	}
	closedByPeer(t, c)
}
