package socks5

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"switchyard/outbound"
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
		{"blocked by rule", fmt.Errorf("block[block]: %w", outbound.ErrBlocked), ReplyNotAllowed},
		{"refused", opErr(syscall.ECONNREFUSED), ReplyConnectionRefused},
		{"refused, wrapped", fmt.Errorf("direct: %w", opErr(syscall.ECONNREFUSED)), ReplyConnectionRefused},
		{"refused by an upstream, as text", errors.New("http upstream: dial 10.0.0.1:80: connection refused"), ReplyConnectionRefused},
		{"network unreachable", opErr(syscall.ENETUNREACH), ReplyNetworkUnreachable},
		{"host unreachable", opErr(syscall.EHOSTUNREACH), ReplyHostUnreachable},
		{"no such host", &net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}, ReplyHostUnreachable},
		{"connect timeout", opErr(syscall.ETIMEDOUT), ReplyHostUnreachable},
		{"deadline", fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), ReplyHostUnreachable},
		{"context deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), ReplyHostUnreachable},
		{"other", errors.New("handshake failed"), ReplyGeneralFailure},
		{"reset", opErr(syscall.ECONNRESET), ReplyGeneralFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReplyFor(tt.err); got != tt.want {
				t.Fatalf("ReplyFor(%v) = %#x (%s), want %#x (%s)", tt.err, got, ReplyText(got), tt.want, ReplyText(tt.want))
			}
		})
	}
}

// A real refused dial maps to 0x05.
func TestReplyForRealRefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		t.Skip("a closed port accepted a connection")
	}
	if got := ReplyFor(err); got != ReplyConnectionRefused {
		t.Fatalf("ReplyFor(%v) = %#x, want 0x05", err, got)
	}
}
