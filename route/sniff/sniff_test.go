package sniff

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"switchyard/route/sniff/snifftest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// splitRecords re-frames the handshake message of a one-record ClientHello
// into records of at most size bytes each.
func splitRecords(hello []byte, size int) []byte {
	msg := hello[recordHeaderLen:]
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordHandshake, 0x03, 0x01, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func TestTLSServerName(t *testing.T) {
	hello := snifftest.ClientHello(t, "Www.Example.COM")
	noSNI := snifftest.ClientHello(t, "")
	tests := []struct {
		name  string
		in    []byte
		want  string
		ok    bool
		proto string
	}{
		{"real ClientHello", hello, "www.example.com", true, "tls"},
		{"followed by more bytes", append(append([]byte{}, hello...), 0x17, 3, 3, 0, 1, 0), "www.example.com", true, "tls"},
		{"split over records", splitRecords(hello, 100), "www.example.com", true, "tls"},
		{"header split over records", splitRecords(hello, 2), "www.example.com", true, "tls"},
		{"no SNI", noSNI, "", false, "tls"},
		{"first record of a split hello only", splitRecords(hello, 64)[:5+64], "", false, ""},
		{"http", []byte("GET / HTTP/1.1\r\n"), "", false, ""},
		{"empty", nil, "", false, ""},
		{"alert record", []byte{0x15, 3, 3, 0, 2, 2, 40}, "", false, ""},
		{"server hello", []byte{0x16, 3, 3, 0, 4, 2, 0, 0, 0}, "", false, ""},
		{"zero-length record", []byte{0x16, 3, 1, 0, 0}, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TLSServerName(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("TLSServerName = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
			proto, domain := Sniff(tt.in)
			if proto != tt.proto || domain != tt.want {
				t.Fatalf("Sniff = %q, %q; want %q, %q", proto, domain, tt.proto, tt.want)
			}
		})
	}
}

// Every prefix of a ClientHello is handled: no name until the server_name
// extension is whole, the right one after, and NeedMore until the message ends.
func TestTLSServerNameTruncated(t *testing.T) {
	for _, hello := range [][]byte{snifftest.ClientHello(t, "a.example.net"), splitRecords(snifftest.ClientHello(t, "a.example.net"), 300)} {
		sniEnd := -1
		for n := 0; n < len(hello); n++ {
			name, ok := TLSServerName(hello[:n])
			if ok {
				if name != "a.example.net" {
					t.Fatalf("prefix %d: name %q", n, name)
				}
				if sniEnd < 0 {
					sniEnd = n
				}
			} else if sniEnd >= 0 {
				t.Fatalf("prefix %d lost the name found at %d", n, sniEnd)
			}
			if !NeedMore(hello[:n]) && !ok {
				t.Fatalf("prefix %d of %d: no name and NeedMore is false", n, len(hello))
			}
		}
		if sniEnd < 0 {
			t.Fatal("no prefix gave the name")
		}
		if NeedMore(hello) {
			t.Fatal("NeedMore on a whole ClientHello")
		}
	}
}

func TestHTTPHost(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string
		ok    bool
		proto string
		more  bool
	}{
		{"host with port", "GET / HTTP/1.1\r\nHost: Example.COM:8080\r\nAccept: */*\r\n\r\n", "example.com", true, "http", false},
		{"lowercase header, LF only", "POST /x HTTP/1.0\nhost:  api.example.org \n\n", "api.example.org", true, "http", false},
		{"host later in the head", "HEAD / HTTP/1.1\r\nUser-Agent: t\r\nHOST: a.b\r\n", "a.b", true, "http", false},
		{"ip host", "GET / HTTP/1.1\r\nHost: 192.0.2.1:80\r\n\r\n", "", false, "http", false},
		{"ipv6 host", "GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", "", false, "http", false},
		{"no host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "", false, "http", false},
		{"head cut before host", "GET / HTTP/1.1\r\nAccept: */*\r\n", "", false, "", true},
		{"request line cut", "GET /index.html HT", "", false, "", true},
		{"method cut", "OPTI", "", false, "", true},
		{"unknown method", "BREW / HTTP/1.1\r\nHost: pot\r\n\r\n", "", false, "", false},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", false, "", false},
		{"http/2 version", "GET / HTTP/2.0\r\nHost: a.b\r\n\r\n", "", false, "", false},
		{"lowercase method", "get / HTTP/1.1\r\nHost: a.b\r\n\r\n", "", false, "", false},
		{"bad host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "", false, "http", false},
		{"binary", "\x00\x01\x02", "", false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := HTTPHost([]byte(tt.in))
			if got != tt.want || ok != tt.ok {
				t.Fatalf("HTTPHost = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
			proto, domain := Sniff([]byte(tt.in))
			if proto != tt.proto || domain != tt.want {
				t.Fatalf("Sniff = %q, %q; want %q, %q", proto, domain, tt.proto, tt.want)
			}
			if more := NeedMore([]byte(tt.in)); more != tt.more {
				t.Fatalf("NeedMore = %v, want %v", more, tt.more)
			}
		})
	}
}

func TestHostNameRejectsIPs(t *testing.T) {
	for _, in := range []string{"10.0.0.1", "::1", ""} {
		if _, ok := hostName([]byte(in)); ok {
			t.Errorf("hostName(%q) accepted", in)
		}
	}
	if got, ok := hostName([]byte("Example.com.")); !ok || got != "example.com" {
		t.Errorf("hostName(Example.com.) = %q, %v", got, ok)
	}
	if _, ok := hostName([]byte(strings.Repeat("a", 254))); ok {
		t.Error("a 254-byte name was accepted")
	}
}

func TestSniffAllocations(t *testing.T) {
	hello := snifftest.ClientHello(t, "www.example.com")
	// One allocation: the returned name.
	if n := testing.AllocsPerRun(50, func() { Sniff(hello) }); n > 1 {
		t.Fatalf("Sniff of a one-record ClientHello allocates %v times", n)
	}
}

func BenchmarkTLSServerName(b *testing.B) {
	hello := snifftest.ClientHello(b, "www.example.com")
	b.ReportAllocs()
	for b.Loop() {
		TLSServerName(hello)
	}
}
