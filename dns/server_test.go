package dns

import (
	"errors"
	"strings"
	"testing"
)

func TestParseServer(t *testing.T) {
	good := []struct {
		in   string
		want Server
	}{
		{"system", Server{Kind: System}},
		{"udp://1.1.1.1", Server{Kind: UDP, Host: "1.1.1.1", Port: 53}},
		{"udp://1.1.1.1:5353", Server{Kind: UDP, Host: "1.1.1.1", Port: 5353}},
		{"UDP://[2606:4700::1111]", Server{Kind: UDP, Host: "2606:4700::1111", Port: 53}},
		{"tcp://8.8.8.8", Server{Kind: TCP, Host: "8.8.8.8", Port: 53}},
		{"tcp://dns.google/", Server{Kind: TCP, Host: "dns.google", Port: 53}},
		{"tls://Dns.Google.", Server{Kind: TLS, Host: "dns.google", Port: 853}},
		{"tls://[::1]:8853", Server{Kind: TLS, Host: "::1", Port: 8853}},
		{"https://cloudflare-dns.com", Server{Kind: HTTPS, Host: "cloudflare-dns.com", Port: 443, Path: "/dns-query"}},
		{"https://1.1.1.1/dns-query", Server{Kind: HTTPS, Host: "1.1.1.1", Port: 443, Path: "/dns-query"}},
		{"https://dns.example:8443/q/resolve?x=1", Server{Kind: HTTPS, Host: "dns.example", Port: 8443, Path: "/q/resolve?x=1"}},
	}
	for _, c := range good {
		got, err := ParseServer(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		c.want.URL = c.in
		if got != c.want {
			t.Errorf("%q = %+v, want %+v", c.in, got, c.want)
		}
	}
	bad := []struct{ in, why string }{
		{"", "expected"},
		{"1.1.1.1", "expected"},
		{"quic://1.1.1.1", "unknown scheme"},
		{"udp://", "missing host"},
		{"udp://:53", "missing host"},
		{"udp://1.1.1.1:0", "port"},
		{"udp://1.1.1.1:65536", "port"},
		{"udp://1.1.1.1:x", "port"},
		{"udp://1.1.1.1:", "port"},
		{"udp://::1", "neither an IP nor a host name"},
		{"udp://[1.1.1.1]", "invalid IP-literal"},
		{"udp://[fe80::1%25eth0]", "zoned"},
		{"udp://user@1.1.1.1", "user"},
		{"udp://1.1.1.1/path", "only allowed for https"},
		{"tcp://1.1.1.1?x", "only allowed for https"},
		{"https://a.b/#frag", "fragment"},
		{"tls://bad_host!", "neither an IP nor a host name"},
		{"tls://a..b", "neither an IP nor a host name"},
		{"tls://" + strings.Repeat("a", 64) + ".com", "neither an IP nor a host name"},
	}
	for _, c := range bad {
		_, err := ParseServer(c.in)
		if err == nil {
			t.Errorf("%q parsed", c.in)
			continue
		}
		if !errors.Is(err, ErrBadServer) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), `"`+c.in+`"`) {
			t.Errorf("%q: %v (want %q and the URL)", c.in, err, c.why)
		}
	}
}

func TestServerString(t *testing.T) {
	for in, want := range map[string]string{
		"system":                     "system",
		"udp://1.1.1.1":              "udp://1.1.1.1:53",
		"tls://[::1]":                "tls://[::1]:853",
		"https://Cloudflare-DNS.com": "https://cloudflare-dns.com:443/dns-query",
	} {
		if got := mustServer(t, in).String(); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// FuzzParseServer: no input panics, and a parsed server's canonical form
// parses to the same server.
func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"system", "udp://1.1.1.1", "tcp://[::1]:53", "tls://dns.google", "https://a.b:8443/dns-query?x=1",
		"udp://::1", "https://[fe80::1%25eth0]/", "tls://a..b", "udp://1.1.1.1:", "https://a/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		srv, err := ParseServer(s)
		if err != nil {
			if !errors.Is(err, ErrBadServer) {
				t.Fatalf("%q: an error not matching ErrBadServer: %v", s, err)
			}
			return
		}
		again, err := ParseServer(srv.String())
		if err != nil {
			t.Fatalf("%q: canonical %q does not parse: %v", s, srv.String(), err)
		}
		again.URL = srv.URL
		if again != srv {
			t.Fatalf("%q: %+v, canonical %q gives %+v", s, srv, srv.String(), again)
		}
		if srv.Kind != System && (srv.Host == "" || srv.Port == 0) {
			t.Fatalf("%q: %+v", s, srv)
		}
	})
}

func mustServer(t testing.TB, u string) Server {
	t.Helper()
	s, err := ParseServer(u)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
