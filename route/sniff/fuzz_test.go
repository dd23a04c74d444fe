package sniff

import (
	"strings"
	"testing"
)

func FuzzTLSServerName(f *testing.F) {
	hello := clientHello(f, "fuzz.example.com")
	f.Add(hello)
	f.Add(splitRecords(hello, 50))
	f.Add(hello[:len(hello)/2])
	f.Add(clientHello(f, ""))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, ok := TLSServerName(b)
		if ok != (name != "") {
			t.Fatalf("name %q with ok %v", name, ok)
		}
		if ok && (name != strings.ToLower(name) || strings.HasSuffix(name, ".")) {
			t.Fatalf("name %q is not normalised", name)
		}
		NeedMore(b)
	})
}

func FuzzHTTPHost(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte("CONNECT a.b:443 HTTP/1.1\r\nhost: a.b:443\r\n\r\n"))
	f.Add([]byte("POST /x HTTP/1.0\nHost: [::1]:80\n\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost"))
	f.Fuzz(func(t *testing.T, b []byte) {
		host, ok := HTTPHost(b)
		if ok != (host != "") {
			t.Fatalf("host %q with ok %v", host, ok)
		}
		if strings.ContainsAny(host, ": \t\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Fatalf("host %q is not a bare lowercase name", host)
		}
		NeedMore(b)
	})
}
