package probe

import (
	"errors"
	"strings"
	"testing"

	"switchyard/netx"
)

func TestParseTarget(t *testing.T) {
	cases := []struct {
		url       string
		https     bool
		dst       string
		authority string
		path      string
		sni       string
	}{
		{DefaultURL, true, "www.gstatic.com:443", "www.gstatic.com", "/generate_204", "www.gstatic.com"},
		{"http://example.com", false, "example.com:80", "example.com", "/", "example.com"},
		{"HTTPS://Example.com/", true, "Example.com:443", "Example.com", "/", "Example.com"},
		// Default ports are left out of the authority, others kept.
		{"http://example.com:80/a", false, "example.com:80", "example.com", "/a", "example.com"},
		{"https://example.com:443/a", true, "example.com:443", "example.com", "/a", "example.com"},
		{"https://example.com:80/a", true, "example.com:80", "example.com:80", "/a", "example.com"},
		{"http://example.com:8080/a", false, "example.com:8080", "example.com:8080", "/a", "example.com"},
		{"http://example.com:/a", false, "example.com:80", "example.com", "/a", "example.com"},
		{"http://example.com:0080/a", false, "example.com:80", "example.com", "/a", "example.com"},
		// Credentials are never sent.
		{"https://user:pass@example.com:8443/a", true, "example.com:8443", "example.com:8443", "/a", "example.com"},
		{"http://a@b@example.com/", false, "example.com:80", "example.com", "/", "example.com"},
		// The fragment is left out.
		{"http://example.com/a?b=1#frag", false, "example.com:80", "example.com", "/a?b=1", "example.com"},
		{"http://example.com#frag", false, "example.com:80", "example.com", "/", "example.com"},
		{"http://example.com/#a?b", false, "example.com:80", "example.com", "/", "example.com"},
		// The raw path and query are kept as written, dot segments too.
		{"http://example.com/a/../b/./c", false, "example.com:80", "example.com", "/a/../b/./c", "example.com"},
		{"http://example.com/%2e%2E/x%2Fy?q=%41&&r", false, "example.com:80", "example.com", "/%2e%2E/x%2Fy?q=%41&&r", "example.com"},
		{"http://example.com//double", false, "example.com:80", "example.com", "//double", "example.com"},
		// A query-only URL asks for /?query.
		{"http://example.com?x=1", false, "example.com:80", "example.com", "/?x=1", "example.com"},
		{"http://example.com:81?x", false, "example.com:81", "example.com:81", "/?x", "example.com"},
		{"http://example.com?", false, "example.com:80", "example.com", "/?", "example.com"},
		// IP literals.
		{"http://192.0.2.1:8080/", false, "192.0.2.1:8080", "192.0.2.1:8080", "/", "192.0.2.1"},
		{"https://[2001:db8::1]/x", true, "[2001:db8::1]:443", "[2001:db8::1]", "/x", "2001:db8::1"},
		{"https://[2001:db8::1]:8443?q", true, "[2001:db8::1]:8443", "[2001:db8::1]:8443", "/?q", "2001:db8::1"},
	}
	for _, tc := range cases {
		got, err := parseTarget(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got.https != tc.https || got.dst.String() != tc.dst || got.authority != tc.authority ||
			got.path != tc.path || got.serverName != tc.sni {
			t.Errorf("%s: https %v dst %s authority %q path %q sni %q; want %v %s %q %q %q",
				tc.url, got.https, got.dst, got.authority, got.path, got.serverName,
				tc.https, tc.dst, tc.authority, tc.path, tc.sni)
		}
	}
}

func TestParseTargetDestination(t *testing.T) {
	got, err := parseTarget("http://192.0.2.1/")
	if err != nil || !got.dst.IP.IsValid() || got.dst.IsName() {
		t.Fatalf("an IPv4 host: %+v, %v; want an IP destination", got.dst, err)
	}
	got, err = parseTarget("http://example.com/")
	if err != nil || got.dst != netx.DomainAddr("example.com", 80) {
		t.Fatalf("a name: %+v, %v", got.dst, err)
	}
}

func TestParseTargetRejects(t *testing.T) {
	for _, u := range []string{
		"",
		"example.com/",
		"ftp://example.com/",
		"http://",
		"http:///path",
		"http://user@/",
		"http://:80/",
		"http://example.com:99999/",
		"http://example.com:0/",
		"http://example.com:x/",
		"http://[2001:db8::1/",
		"http://[192.0.2.1]/",
		"http://[fe80::1%25eth0]/",
		"http://[2001:db8::1]x/",
		"http://2001:db8::1/",
		"http://exa mple.com/",
		"http://example.com/a b",
		"http://example.com/\x00",
		"http://example.com/é",
		"http://ex*ample.com/",
		"http://example.com/" + strings.Repeat("a", maxRequestTarget),
	} {
		if _, err := parseTarget(u); !errors.Is(err, ErrBadURL) {
			t.Errorf("%q: %v; want ErrBadURL", u, err)
		}
	}
}

func TestParseMethod(t *testing.T) {
	for in, want := range map[string]string{"": "HEAD", "HEAD": "HEAD", "head": "HEAD", "GET": "GET", "get": "GET"} {
		if got, err := parseMethod(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"POST", "OPTIONS", "G ET"} {
		if _, err := parseMethod(in); !errors.Is(err, ErrMethod) {
			t.Errorf("%q: %v; want ErrMethod", in, err)
		}
	}
}

func TestAppendRequest(t *testing.T) {
	tg, err := parseTarget("http://u:p@example.com:8080/a/../b?q#f")
	if err != nil {
		t.Fatal(err)
	}
	got := string(appendRequest(nil, &tg, "GET"))
	want := "GET /a/../b?q HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: switchyard\r\nAccept: */*\r\n\r\n"
	if got != want {
		t.Fatalf("request\n%q\nwant\n%q", got, want)
	}
}
