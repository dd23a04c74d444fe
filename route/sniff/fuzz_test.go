package sniff

import (
	"strings"
	"testing"

	"switchyard/route/sniff/snifftest"
)

func FuzzTLSServerName(f *testing.F) {
	hello := snifftest.ClientHello(f, "fuzz.example.com")
	f.Add(hello)
	f.Add(splitRecords(hello, 50))
	f.Add(hello[:len(hello)/2])
	f.Add(snifftest.ClientHello(f, ""))
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

// FuzzQUIC feeds QUIC arbitrary datagrams (raw, split in two at cut) and
// arbitrary Initial payloads sealed as a client's, so that the frame walk,
// the reassembly and the ClientHello parser see what only decrypts.
func FuzzQUIC(f *testing.F) {
	msg := snifftest.HandshakeMessage(f, "fuzz.example.org")
	f.Add(unhex(f, rfc9001ClientInitial), uint16(0), snifftest.Pad(snifftest.Crypto(0, msg), 1200))
	f.Add(unhex(f, rfc9369ClientInitial), uint16(600), append(snifftest.Crypto(40, msg[40:]), snifftest.Crypto(0, msg[:40])...))
	f.Add([]byte{0xc0, 0, 0, 0, 1, 8}, uint16(3), []byte{frameACKECN, 1, 0, 1, 0, 0, 0, 0, 0, frameCrypto, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{}, uint16(0), []byte{frameCrypto, 0x80, 0, 0xff, 0xff, 0x10})
	f.Fuzz(func(t *testing.T, raw []byte, cut uint16, frames []byte) {
		check := func(name string, quic, more bool) {
			if name != "" && (!quic || more) {
				t.Fatalf("name %q with quic %v more %v", name, quic, more)
			}
			if name != strings.ToLower(name) || strings.HasSuffix(name, ".") {
				t.Fatalf("name %q is not normalised", name)
			}
		}
		QUICInitial(raw)
		check(QUIC(raw))
		c := int(cut) % (len(raw) + 1)
		check(QUIC(raw[:c], raw[c:]))
		sealed := snifftest.Initial(t, snifftest.V1, testDCID, uint32(cut), snifftest.Pad(frames, 20))
		name, quic, more := QUIC(sealed, raw)
		check(name, quic, more)
		if !quic {
			t.Fatal("a sealed Initial did not decrypt")
		}
	})
}

func FuzzDNS(f *testing.F) {
	f.Add(snifftest.DNSQuery("www.example.com", 1, 1, false))
	f.Add(snifftest.DNSQuery("a.b", 28, 1, true))
	f.Add(snifftest.DNSQuery(".", 2, 255, false))
	f.Add([]byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, ok := DNSQuery(b)
		if !ok && name != "" {
			t.Fatalf("name %q without ok", name)
		}
		if name != strings.ToLower(name) || strings.HasSuffix(name, ".") || len(name) > 253 {
			t.Fatalf("name %q is not normalised", name)
		}
	})
}
