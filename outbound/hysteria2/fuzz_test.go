package hysteria2

import "testing"

// FuzzParseAuthority feeds the reply-source parser what a server may write:
// it must never panic, refuse port 0, and accept only addresses that format
// back to something it parses to the same peer.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:53", "[2001:db8::1]:443", "example.com:80", "127.0.0.1:0",
		"[::ffff:1.2.3.4]:9", "host:99999", "[fe80::1%eth0]:1", ":", "[]:1", "a:b:c", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAuthority(s)
		if !ok {
			return
		}
		if a.Port == 0 || !a.IsValid() {
			t.Fatalf("parseAuthority(%q) accepted %v", s, a)
		}
		var names authorities
		back, ok := parseAuthority(names.format(a))
		if !ok || back != a {
			t.Fatalf("%q: %v formats to %q, which parses to %v, %v", s, a, names.format(a), back, ok)
		}
	})
}
