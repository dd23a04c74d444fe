package tun_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"switchyard/internal/ping"
)

// An echo request toward a destination routed direct is relayed to it and
// its reply comes back; one toward a blocked destination is refused at
// once with an unreachable, never answered as if the host replied.
func TestEchoThroughTheTUN(t *testing.T) {
	l := newLab(t)
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	if err := run("ip", "netns", "exec", l.client, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647"); err != nil {
		t.Fatal(err)
	}
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config("")+"\n[[rules]]\nip_cidr = [\""+l.peer2+"/32\"]\noutbound = \"block\"\n")
	err := in(l.client, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := ping.Echo(ctx, ping.Options{}, netip.MustParseAddr(l.web), []byte("hello"))
		if err != nil || string(got) != "hello" {
			return errors.Join(errors.New("direct echo failed"), err)
		}
		start := time.Now()
		got, err = ping.Echo(ctx, ping.Options{}, netip.MustParseAddr(l.peer2), []byte("hello"))
		if err == nil {
			return errors.New("a blocked destination answered an echo: " + string(got))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 3*time.Second {
			return errors.Join(errors.New("a blocked echo was not refused, it timed out"), err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, sw.Logs)
	}
}
