package config

import (
	"testing"
	"time"

	"switchyard/spec"
)

func TestXHTTPLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "plain"
type = "vless"
server = "example.com:80"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp" }
[[outbounds]]
tag = "all"
type = "vmess"
server = "192.0.2.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", path = "/x?k=v", host = "cdn.example", headers = { "X-Forwarded-For" = "1.2.3.4" }, mode = "packet-up", x_padding_bytes = "10-20", sc_max_each_post_bytes = 50000, sc_min_posts_interval_ms = 0 }
tls = { server_name = "front.example", alpn = ["http/1.1"] }
[[outbounds]]
tag = "one"
type = "trojan"
server = "t.example:443"
password = "p"
transport = { type = "xhttp", mode = "stream-one", x_padding_bytes = "300" }
tls = {}
[[outbounds]]
tag = "ss"
type = "shadowsocks"
server = "192.0.2.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "xhttp", mode = "stream-up" }
`)
	ms := time.Millisecond
	want := []struct {
		transport spec.Transport
		tls       *spec.TLS
	}{
		{spec.Transport{Type: "xhttp", Path: "/", Host: "example.com", Mode: "auto", XPaddingMin: 100, XPaddingMax: 1000,
			MaxEachPostBytes: 1_000_000, MinPostsInterval: 30 * ms}, nil},
		{spec.Transport{Type: "xhttp", Path: "/x?k=v", Host: "cdn.example", Headers: map[string]string{"X-Forwarded-For": "1.2.3.4"},
			Mode: "packet-up", XPaddingMin: 10, XPaddingMax: 20, MaxEachPostBytes: 50000},
			&spec.TLS{ServerName: "front.example", ALPN: []string{"http/1.1"}}},
		{spec.Transport{Type: "xhttp", Path: "/", Host: "t.example", Mode: "stream-one", XPaddingMin: 300, XPaddingMax: 300,
			MaxEachPostBytes: 1_000_000, MinPostsInterval: 30 * ms},
			&spec.TLS{ServerName: "t.example", ALPN: []string{"h2"}}},
		{spec.Transport{Type: "xhttp", Path: "/", Host: "192.0.2.1", Mode: "stream-up", XPaddingMin: 100, XPaddingMax: 1000,
			MaxEachPostBytes: 1_000_000, MinPostsInterval: 30 * ms}, nil},
	}
	for i, w := range want {
		o := s.Outbounds[i]
		if !spec.Equal(o.Transport, w.transport) || !spec.Equal(o.TLS, w.tls) {
			t.Errorf("outbound %s:\n got  %+v %+v\n want %+v %+v", o.Tag, o.Transport, o.TLS, w.transport, w.tls)
		}
	}
	if s.Outbounds[3].UDP {
		t.Error("shadowsocks over xhttp carries UDP to the server's relay, beside the transport")
	}
}

func TestXHTTPErrors(t *testing.T) {
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", path = "x", mode = "stream", x_padding_bytes = "0-10", headers = { Referer = "r", Host = "h" }, service_name = "s" }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "stream-up", sc_max_each_post_bytes = 10, sc_min_posts_interval_ms = 5 }
tls = { alpn = ["http/1.1"] }
[[outbounds]]
tag = "c"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", x_padding_bytes = "20-10", sc_max_each_post_bytes = 0, sc_min_posts_interval_ms = -1 }
tls = { alpn = ["h2", "http/1.1"] }
[[outbounds]]
tag = "d"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", x_padding_bytes = "lots" }
`, []want{
		{6, "outbounds[0].transport.service_name", "an xhttp transport has no service name"},
		{6, "outbounds[0].transport.path", `"x" must start with "/"`},
		{6, "outbounds[0].transport.headers.Host", "set the transport's host key instead of a Host header"},
		{6, "outbounds[0].transport.headers.Referer", "Referer is written by the xhttp transport itself"},
		{6, "outbounds[0].transport.mode", `"stream" is not one of auto | stream-one | stream-up | packet-up`},
		{6, "outbounds[0].transport.x_padding_bytes", `"0-10": the padding is 1..4096 bytes`},
		{12, "outbounds[1].transport.sc_max_each_post_bytes", `only packet-up sends POSTs of a bounded size; mode "stream-up" streams its upload`},
		{12, "outbounds[1].transport.sc_min_posts_interval_ms", `only packet-up spaces its POSTs`},
		{12, "outbounds[1].transport.mode", `mode "stream-up" needs HTTP/2: over alpn ["http/1.1"] only packet-up runs`},
		{19, "outbounds[2].transport.x_padding_bytes", `"20-10": the padding is 1..4096 bytes, MIN no more than MAX`},
		{19, "outbounds[2].transport.sc_max_each_post_bytes", "0 is out of range 1..16777216"},
		{19, "outbounds[2].transport.sc_min_posts_interval_ms", "-1 is out of range 0..10000"},
		{20, "outbounds[2].tls.alpn", `an xhttp transport runs over HTTP/2 (alpn ["h2"], the default), HTTP/3 (alpn ["h3"]) or, in packet-up mode, HTTP/1.1`},
		{26, "outbounds[3].transport.x_padding_bytes", `"lots" is not a byte count or a range "MIN-MAX"`},
	})
}

func TestXHTTPXMuxLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "stream-up", no_grpc_header = true, xmux = { max_concurrency = "16-32", c_max_reuse_times = 8, h_max_request_times = "100", h_max_reusable_secs = "60-120", h_keep_alive_period = -1 } }
tls = {}
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", xmux = { max_connections = 4, h_keep_alive_period = 20 } }
tls = {}
[[outbounds]]
tag = "c"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", xmux = { max_concurrency = 0 } }
tls = {}
`)
	want := []*spec.XMux{
		{MaxConcurrency: [2]int64{16, 32}, CMaxReuseTimes: [2]int64{8, 8}, HMaxRequestTimes: [2]int64{100, 100},
			HMaxReusableSecs: [2]int64{60, 120}, KeepAlive: -1},
		{MaxConnections: [2]int64{4, 4}, KeepAlive: 20 * time.Second},
		nil, // all bounds 0: Xray's default, as without the table
	}
	for i, w := range want {
		if got := s.Outbounds[i].Transport.XMux; !spec.Equal(got, w) {
			t.Errorf("outbound %d: xmux %+v, want %+v", i, got, w)
		}
	}
	if !s.Outbounds[0].Transport.NoGRPCHeader || s.Outbounds[1].Transport.NoGRPCHeader {
		t.Error("no_grpc_header not lowered")
	}
}

func TestXHTTPXMuxErrors(t *testing.T) {
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "packet-up", no_grpc_header = true, xmux = { max_concurrency = 2 } }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", xmux = { max_concurrency = "8-4", max_connections = 2, c_max_reuse_times = "many", h_max_request_times = -3, h_max_reusable_secs = 1.5, h_keep_alive_period = 100000 } }
tls = {}
[[outbounds]]
tag = "c"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", xmux = { max_concurrency = 2, max_connections = 2, concurrency = 1 } }
tls = {}
`, []want{
		{6, "outbounds[0].transport.no_grpc_header", `mode "packet-up" streams no POST`},
		{6, "outbounds[0].transport.xmux", "xmux shares HTTP/2 connections between flows; this transport runs packet-up over HTTP/1.1"},
		{12, "outbounds[1].transport.xmux.max_concurrency", "8-4 is out of range 0..2147483647 (MIN no more than MAX)"},
		{12, "outbounds[1].transport.xmux.c_max_reuse_times", `"many" is not a count or a range "MIN-MAX"`},
		{12, "outbounds[1].transport.xmux.h_max_request_times", "-3 is out of range 0..2147483647"},
		{12, "outbounds[1].transport.xmux.h_max_reusable_secs", `must be a count or a string "N" or "MIN-MAX"`},
		{12, "outbounds[1].transport.xmux.h_keep_alive_period", "100000 is over 86400 seconds"},
		{19, "outbounds[2].transport.xmux.concurrency", `unknown key "concurrency"`},
		{19, "outbounds[2].transport.xmux.max_connections", "max_connections and max_concurrency exclude each other"},
	})
}

func TestXHTTPDownloadLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "inherit"
type = "vless"
server = "up.example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", path = "/xh", mode = "stream-up", x_padding_bytes = "50", download = { server = "203.0.113.7:8443" } }
tls = { server_name = "cdn.example.com" }
[[outbounds]]
tag = "own"
type = "vless"
server = "up.example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", host = "up.example.com", download = { server = "down.example.com:443", tls = { fingerprint = "chrome" }, path = "/dl", host = "down.example.com", headers = { X-A = "1" }, x_padding_bytes = "10-20", xmux = { max_concurrency = 4 } } }
tls = {}
[[outbounds]]
tag = "plain"
type = "vless"
server = "192.0.2.1:80"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", download = { server = "192.0.2.2:80" } }
`)
	want := []*spec.XHTTPDownload{
		{Server: "203.0.113.7:8443", TLS: &spec.TLS{ServerName: "cdn.example.com", ALPN: []string{"h2"}}, Path: "/xh", Host: "cdn.example.com", XPaddingMin: 50, XPaddingMax: 50},
		{Server: "down.example.com:443", TLS: &spec.TLS{ServerName: "down.example.com", ALPN: []string{"h2"}, Fingerprint: "chrome"}, Path: "/dl",
			Host: "down.example.com", Headers: map[string]string{"X-A": "1"}, XPaddingMin: 10, XPaddingMax: 20, XMux: &spec.XMux{MaxConcurrency: [2]int64{4, 4}}},
		{Server: "192.0.2.2:80", Path: "/", Host: "192.0.2.2", XPaddingMin: 100, XPaddingMax: 1000},
	}
	for i, w := range want {
		if got := s.Outbounds[i].Transport.Download; !spec.Equal(got, w) {
			t.Errorf("outbound %s:\n got  %+v %+v\n want %+v %+v", s.Outbounds[i].Tag, got, got.TLS, w, w.TLS)
		}
	}
}

func TestXHTTPDownloadErrors(t *testing.T) {
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "stream-one", download = { server = "d.example.com:443" } }
tls = {}
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "stream-up", download = { server = "d.example.com", path = "dl", tls = { alpn = ["http/1.1"] }, mode = "packet-up" } }
tls = {}
[[outbounds]]
tag = "c"
type = "trojan"
server = "example.com:443"
password = "p"
transport = { type = "xhttp", download = { tls = { reality = { public_key = "k" } }, xmux = { max_concurrency = 2 } } }
tls = {}
`, []want{
		{6, "outbounds[0].transport.download", `mode "stream-one" carries the download in its one POST's answer`},
		{13, "outbounds[1].transport.download.mode", `unknown key "mode"`},
		{13, "outbounds[1].transport.download.server", "missing port in address"},
		{13, "outbounds[1].transport.download.path", `"dl" must start with "/"`},
		{13, "outbounds[1].transport.download.tls.alpn", `mode "stream-up" needs HTTP/2: over alpn ["http/1.1"] only packet-up runs`},
		{20, "outbounds[2].transport.download.tls.reality.public_key", "not an X25519 public key"},
		{20, "outbounds[2].transport.download.tls.reality", "REALITY is offered for vless outbounds only"},
	})
}

func TestXHTTPPostRanges(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "packet-up", sc_max_each_post_bytes = "500000-1000000", sc_min_posts_interval_ms = "10-50" }
tls = {}
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "packet-up", sc_max_each_post_bytes = "2000-2000", sc_min_posts_interval_ms = 5 }
tls = {}
`)
	a, b := s.Outbounds[0].Transport, s.Outbounds[1].Transport
	if a.MaxEachPostBytes != 500000 || a.MaxEachPostBytesMax != 1000000 || a.MinPostsInterval != 10*time.Millisecond || a.MinPostsIntervalMax != 50*time.Millisecond {
		t.Errorf("ranges: %+v", a)
	}
	if b.MaxEachPostBytes != 2000 || b.MaxEachPostBytesMax != 0 || b.MinPostsInterval != 5*time.Millisecond || b.MinPostsIntervalMax != 0 {
		t.Errorf("single values: %+v", b)
	}
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "packet-up", sc_max_each_post_bytes = "9-3", sc_min_posts_interval_ms = "a-b" }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", sc_min_posts_interval_ms = 5 }
`, []want{
		{6, "outbounds[0].transport.sc_max_each_post_bytes", "9-3 is out of range 1..16777216 (MIN no more than MAX)"},
		{6, "outbounds[0].transport.sc_min_posts_interval_ms", `"a-b" is not a count or a range "MIN-MAX"`},
		{12, "outbounds[1].transport.sc_min_posts_interval_ms", "a ws transport has no sc min posts interval ms"},
	})
}

func TestXHTTPOverHTTP3(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp", mode = "stream-up", xmux = { max_concurrency = 8 } }
tls = { alpn = ["h3"] }
`)
	if a := s.Outbounds[0].TLS.ALPN; len(a) != 1 || a[0] != "h3" {
		t.Errorf("alpn %q", a)
	}
	wantProblems(t, `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp" }
tls = { alpn = ["h3"], fingerprint = "chrome" }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "xhttp" }
tls = { alpn = ["h3"] }
[[balancers]]
tag = "pool"
members = ["b"]
`, []want{
		{7, "outbounds[0].tls.alpn", "HTTP/3 (alpn [\"h3\"]) runs on QUIC's own TLS handshake, which has no browser fingerprint"},
		{17, "balancers[0].members[0]", "balancer pool: outbound b has no upstream a TCP health probe can reach"},
	})
}
