package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"switchyard/spec"
)

// FuzzParse checks that no input panics the loader, that a rejection is
// always Errors with located, worded problems, and that an accepted text
// lowers to the same spec every time.
func FuzzParse(f *testing.F) {
	f.Add(Default())
	if full, err := os.ReadFile(filepath.Join("testdata", "full.toml")); err == nil {
		f.Add(full)
	}
	f.Add([]byte("[[outbounds]]\ntag = \"d\"\ntype = \"freedom\"\n[[rules]]\nip_cidr = [\"10.0.0.0/8\"]\noutbound = \"d\"\n"))
	f.Add([]byte("inbounds = [{ tag = \"a\", type = \"socks\", listen = \"[::1]:1080\", users = [{ username = \"u\", password = \"p\" }] }]\n"))
	f.Add([]byte("[log]\nLevel = 1\n[[groups]]\n"))
	f.Add([]byte("[[balancers]]\ntag = \"pool\"\nmembers = [\"direct\", \"pool\"]\nstrategy = \"round_robin\"\nprobe_interval = \"10s\"\nprobe_timeout = \"1s\"\n[route]\nfinal = \"pool\"\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"s\"\ntype = \"socks\"\nserver = \"[::1]:1080\"\nusername = \"u\"\npassword = \"p\"\ntls = { server_name = \"h\", alpn = [\"h2\"], verify = \"insecure\" }\n[[balancers]]\ntag = \"pool\"\nmembers = [\"s\"]\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"h\"\ntype = \"http\"\nserver = \"proxy.example:3128\"\nudp = true\ntransport = { type = \"ws\", path = \"/\" }\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"ss\"\ntype = \"shadowsocks\"\nserver = \"192.0.2.1:8388\"\nmethod = \"2022-blake3-aes-128-gcm\"\npassword = \"AAECAwQFBgcICQoLDA0ODw==:MjM0NTY3ODk6Ozw9Pj9AQQ==\"\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"t\"\ntype = \"trojan\"\nserver = \"example.com:443\"\npassword = \"p\"\n[outbounds.tls]\nca_file = \"ca.pem\"\nfingerprint = \"chrome\"\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"v\"\ntype = \"vless\"\nserver = \"example.com:443\"\nuuid = \"B831381D-6324-4D53-AD4F-8CDA48B30811\"\nflow = \"xtls-rprx-vision\"\npacket_encoding = \"xudp\"\n"))
	f.Add([]byte("outbounds = [{ tag = \"m\", type = \"vmess\", server = \"example.com:443\", uuid = \"b831381d-6324-4d53-ad4f-8cda48b30811\", security = \"zero\", global_padding = false, alter_id = 0, transport = { type = \"grpc\" }, tls = {} }]\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"w\"\ntype = \"vless\"\nserver = \"192.0.2.1:443\"\nuuid = \"b831381d-6324-4d53-ad4f-8cda48b30811\"\ntransport = { type = \"ws\", path = \"/ray?ed=2048&a=b\", host = \"cdn.example\", headers = { \"User-Agent\" = \"x\", Host = \"h\" }, early_data_header = \"X-Ed\" }\ntls = { server_name = \"front.example\", fingerprint = \"chrome\" }\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"u\"\ntype = \"trojan\"\nserver = \"example.com:443\"\npassword = \"p\"\ntransport = { type = \"httpupgrade\", path = \"/up\", service_name = \"s\" }\ntls = { alpn = [\"h2\"] }\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"x\"\ntype = \"vless\"\nserver = \"example.com:443\"\nuuid = \"b831381d-6324-4d53-ad4f-8cda48b30811\"\ntransport = { type = \"xhttp\", path = \"/x?a=b\", mode = \"packet-up\", x_padding_bytes = \"10-20\", sc_max_each_post_bytes = 1000, sc_min_posts_interval_ms = 5 }\ntls = { alpn = [\"http/1.1\"] }\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"g\"\ntype = \"vmess\"\nserver = \"example.com:443\"\nuuid = \"b831381d-6324-4d53-ad4f-8cda48b30811\"\ntransport = { type = \"grpc\", service_name = \"Tun\", authority = \"a.example\", mode = \"multi\" }\ntls = { alpn = [\"h2\"], fingerprint = \"random\" }\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"hy2\"\ntype = \"hysteria2\"\nserver = \"[2001:db8::1]:443\"\npassword = \"p\"\nobfs = { type = \"salamander\", password = \"obfs\" }\nup_mbps = 10\ndown_mbps = 100\ntls = { server_name = \"h\", alpn = [\"h3\"] }\n[[balancers]]\ntag = \"pool\"\nmembers = [\"hy2\"]\n"))
	f.Add([]byte("[[outbounds]]\ntag = \"wg\"\ntype = \"wireguard\"\nendpoint = \"203.0.113.1:51820\"\nprivate_key = \"ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\"\npeer_public_key = \"eaYx7t4b+cmPEgMs3q3Q56B5OY/HhriMyEbsia+FpRo=\"\naddresses = [\"10.7.0.2\", \"fd00:7::2/64\"]\nmtu = 1280\nkeepalive = \"25s\"\nallowed_ips = [\"0.0.0.0/0\"]\nreserved = [0, 1, 2]\n"))
	f.Add([]byte("[[groups]]\ntag = \"sel\"\npolicy = \"selector\"\nmembers = [\"auto\", \"direct\"]\ndefault = \"auto\"\nfinal = \"block\"\ninterrupt = false\nuse = []\ncheck_url = \"https://x.example/\"\n[[groups]]\ntag = \"auto\"\npolicy = \"urltest\"\nmembers = [\"sel\", \"direct\"]\ntolerance = \"0s\"\nidle_timeout = \"10m\"\n[[rules]]\nport = [443]\noutbound = \"auto\"\n[route]\nfinal = \"sel\"\n"))
	f.Add([]byte("groups = [{ tag = \"fb\", policy = \"fallback\", members = [\"direct\", \"fb\"], final = \"lb\" }, { tag = \"lb\", policy = \"loadbalance\", members = [\"block\"], check_url = \"http://[::1]:80/\", use = [\"sub\"] }, { tag = \"s\", policy = \"score\", members = [] }]\n"))
	f.Add([]byte("[[groups]]\ntag = \"smart\"\npolicy = \"score\"\nmembers = [\"inner\", \"direct\"]\nfinal = \"block\"\ninterrupt = true\ncheck_url = \"https://x.example/204\"\nidle_timeout = \"5m\"\n[[groups]]\ntag = \"inner\"\npolicy = \"score\"\nmembers = [\"direct\"]\ntolerance = \"1ms\"\n[route]\nfinal = \"smart\"\n"))
	f.Add([]byte("[health]\ntcp_check_url = [\"https://www.gstatic.com/generate_204\", \"\"]\ntcp_check_method = \"GET\"\nudp_check_dns = [\"[2001:db8::53]:53\", \"dns.example:0\"]\ncheck_interval = \"5s\"\ncheck_timeout = \"6s\"\nidle_timeout = \"1h\"\n[state]\npath = \"\"\n"))
	f.Add([]byte("health = { tcp_check_url = [], udp_check_dns = [] }\nstate = { path = \"state/sy.db\" }\n"))
	f.Add([]byte("[dns]\nservers = [\"udp://1.1.1.1\", \"tcp://[2001:db8::1]:53\", \"tls://Dns.Example\", \"https://dns.google\", \"system\"]\nserve = true\nbootstrap = \"udp://9.9.9.9\"\ncache_size = 10\nmin_ttl = \"1m\"\nmax_ttl = \"30s\"\ntimeout = \"0s\"\n[[outbounds]]\ntag = \"dns-out\"\ntype = \"dns\"\n[[rules]]\nprotocol = [\"dns\"]\noutbound = \"dns-out\"\n"))
	f.Add([]byte("[dns]\npre_proxy = [\"udp://223.5.5.5\"]\nthrough_proxy = [\"https://[::1]:8443/q?x\", \"ftp://x\"]\n[[dns.rules]]\ndomain = [\"a.\"]\ndomain_suffix = [\".CN\"]\ndomain_keyword = [\"x\"]\ndomain_regex = [\"(\"]\nservers = [\"system\", \"system\"]\n[[dns.rules]]\nrule_set = [\"geosite\"]\naction = \"block\"\nblock_with = \"empty\"\n[[dns.rules]]\nblock_with = \"nxdomain\"\n"))
	f.Add([]byte("dns = { serve = false, fakeip = { ipv4 = \"198.18.0.1/15\", ipv6 = \"fc00::/120\", fake_ip_filter = [\"lan\", \".\"], size = 257 }, rules = [{ domain = [\"x\"], action = \"block\" }] }\n[[outbounds]]\ntag = \"d\"\ntype = \"dns\"\nudp = false\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		located := func(kind string, es []*Error) {
			for _, e := range es {
				if e.Msg == "" || e.File != "fuzz.toml" || e.Line < 0 || e.Line > lines {
					t.Fatalf("bad %s %#v in a %d-line document", kind, e, lines)
				}
			}
		}
		s, warns, err := Parse(data, "fuzz.toml")
		if err != nil {
			if s != nil || warns != nil {
				t.Fatal("a spec or warnings came back with an error")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			located("problem", errs)
			return
		}
		if warns != nil && len(warns) == 0 {
			t.Fatal("empty warnings are not nil")
		}
		located("warning", warns)
		again, warnsAgain, err := Parse(data, "fuzz.toml")
		if err != nil || !spec.Equal(s, again) || !spec.Equal(warns, warnsAgain) {
			t.Fatalf("two parses of one text differ: %v", err)
		}
	})
}
