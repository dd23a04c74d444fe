package hysteria2

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

func TestTheCAFileIsReadAtEachConnect(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))
	keyOnly := write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name, file, want string
	}{
		{"missing", missing, "hysteria2: could not read the CA file: open " + missing + ": no such file or directory"},
		{"unusable", bad, "hysteria2: the CA file holds an unusable certificate: x509: "},
		{"empty", keyOnly, "hysteria2: the CA file contains no certificates"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			o := h.outbound(testSpec(netip.MustParseAddrPort("192.0.2.1:443"), testCert{caFile: tc.file}))
			_, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v, want prefix %q", err, tc.want)
			}
			if h.sockets.count() != 0 {
				t.Fatal("a socket was opened with an unusable CA file")
			}
			if !strings.Contains(h.logs.String(), "hysteria2: connect failed: "+tc.want) {
				t.Fatalf("not logged as a failed connect:\n%s", h.logs)
			}
		})
	}
}

func TestAReplacedCAFileTakesEffectAtTheNextConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	clk := newManualClock()
	h.clock = clk
	ca := filepath.Join(t.TempDir(), "ca.pem")
	o := h.outbound(testSpec(srv.addr, testCert{caFile: ca}))
	if _, err := o.DialStream(context.Background(), netx.Flow{Dst: tcpEcho(t)}); err == nil {
		t.Fatal("dial without the CA file")
	}
	data, err := os.ReadFile(srv.cert.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, data, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(slot.DefaultPolicy.Wait(1))
	dialEcho(t, o, tcpEcho(t))
}

// names is a resolver with fixed answers.
type names map[string][]netip.Addr

func (n names) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	ips, ok := n[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return ips, nil
}

func TestTheServerNameIsResolvedUnderTheAddressFamily(t *testing.T) {
	srv := startServer(t, serverOptions{})
	resolver := names{
		"nothing.test": nil,
		"v6only.test":  {netip.MustParseAddr("::1")},
		"both.test":    {netip.MustParseAddr("::1"), srv.addr.Addr()},
	}
	cases := []struct {
		host, family string
		want         string // "" = the dial succeeds
	}{
		{"nothing.test", "auto", "hysteria2: the server name resolved to no usable address"},
		{"v6only.test", "ipv4_only", "hysteria2: the server name resolved to no usable address"},
		{"unknown.test", "auto", "hysteria2: resolving unknown.test: no such host"},
		{"both.test", "ipv4_only", ""},
	}
	for _, tc := range cases {
		t.Run(tc.host+"/"+tc.family, func(t *testing.T) {
			h := newHarness(t)
			h.servers = resolver
			s := testSpec(srv.addr, srv.cert)
			s.Server = fmt.Sprintf("%s:%d", tc.host, srv.addr.Port())
			s.AddressFamily = tc.family
			o := h.outbound(s)
			c, err := o.DialStream(context.Background(), netx.Flow{Dst: tcpEcho(t)})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if h.sockets.count() != 0 {
				t.Fatal("a socket was opened without an address")
			}
		})
	}
}

func TestEachAddressIsTriedInOrder(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	h.timeout = 300 * time.Millisecond
	// Nothing answers on 127.0.0.2: the first attempt runs out its timeout.
	h.servers = names{"two.test": {netip.MustParseAddr("127.0.0.2"), srv.addr.Addr()}}
	s := testSpec(srv.addr, srv.cert)
	s.Server = fmt.Sprintf("two.test:%d", srv.addr.Port())
	o := h.outbound(s)
	dialEcho(t, o, tcpEcho(t))
	if n := h.sockets.count(); n != 2 {
		t.Fatalf("%d sockets, want one per address tried", n)
	}
}
