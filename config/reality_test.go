package config

import (
	"encoding/base64"
	"testing"

	"switchyard/spec"
)

// realityPub is a REALITY server's public key as its config names it.
var realityPub = base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// A reality table lowers to the key, the short id (zero-padded), the
// spider path, and the server name and fingerprint it holds (chrome unless
// written); the server's host is the default name.
func TestRealityLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "a"
type = "vless"
server = "203.0.113.7:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { reality = { public_key = "`+realityPub+`", short_id = "6ba8", server_name = "www.example.com", fingerprint = "firefox", spider_x = "/index?x=1" } }
[[outbounds]]
tag = "b"
type = "vless"
server = "proxy.example:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { reality = { public_key = "`+realityPub+`" } }
`)
	var key [32]byte
	copy(key[:], "0123456789abcdef0123456789abcdef")
	want := []*spec.TLS{
		{ServerName: "www.example.com", Fingerprint: "firefox", Reality: &spec.Reality{PublicKey: key, ShortID: [8]byte{0x6b, 0xa8}, SpiderX: "/index?x=1"}},
		{ServerName: "proxy.example", Fingerprint: "chrome", Reality: &spec.Reality{PublicKey: key}},
	}
	for i, w := range want {
		if got := s.Outbounds[i].TLS; !spec.Equal(got, w) {
			t.Errorf("outbound %d: TLS %+v (%+v), want %+v", i, got, got.Reality, w)
		}
	}
}

func TestRealityErrors(t *testing.T) {
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { server_name = "x.example", verify = "insecure", reality = { public_key = "short", short_id = "abc", spider_x = "index" } }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { reality = { short_id = "0123456789abcdef01", fingerprint = "opera" } }
[[outbounds]]
tag = "c"
type = "trojan"
server = "example.com:443"
password = "p"
tls = { reality = { public_key = "`+realityPub+`" } }
[[outbounds]]
tag = "d"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws" }
tls = { reality = { public_key = "`+realityPub+`" } }
`, []want{
		{6, "outbounds[0].tls.server_name", "with reality, server_name does not apply to the tls table"},
		{6, "outbounds[0].tls.verify", "with reality, verify does not apply"},
		{6, "outbounds[0].tls.reality.public_key", "not an X25519 public key"},
		{6, "outbounds[0].tls.reality.short_id", "not hex"},
		{6, "outbounds[0].tls.reality.spider_x", `"index": a path starts with "/"`},
		{12, "outbounds[1].tls.reality.public_key", "required key is missing"},
		{12, "outbounds[1].tls.reality.short_id", "at most 16 hex digits"},
		{12, "outbounds[1].tls.reality.fingerprint", `"opera" is not one of chrome`},
		{18, "outbounds[2].tls.reality", "REALITY is offered for vless outbounds only"},
		{25, "outbounds[3].tls.reality", "REALITY runs under the tcp and grpc transports"},
	})
}
