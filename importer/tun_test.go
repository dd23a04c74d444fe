package importer

import (
	"strings"
	"testing"

	"switchyard/config"
)

// loaderHasTUN says whether this build's loader takes a tun inbound.
func loaderHasTUN() bool {
	_, _, err := config.Parse([]byte("[[inbounds]]\ntag = \"t\"\ntype = \"tun\"\n"), "probe")
	return err == nil
}

// A TUN inbound, mihomo's tun section or a sing-box tun inbound, is
// converted when the loader takes type "tun", and otherwise reported with
// its line; either way the output loads.
func TestTUNInboundsFollowTheLoader(t *testing.T) {
	cases := []struct {
		name, in, item string
		line           int
		keys           []string
	}{
		{"mihomo", `mixed-port: 7890
tun:
  enable: true
  stack: system
  device: utun9
  mtu: 1500
  auto-route: true
  strict-route: true
  dns-hijack: [any:53]
  route-exclude-address: [192.168.0.0/16]
`, "tun", 2, []string{`name = "utun9"`, `mtu = 1500`, `auto_route = true`, `strict_route = true`, `route_exclude_address = ["192.168.0.0/16"]`}},
		{"mihomo listener", `listeners:
  - name: tun-l
    type: tun
    device: sy7
    dns-hijack: []
`, `listener "tun-l"`, 2, []string{`name = "sy7"`, `dns_hijack = false`}},
		{"sing-box", `{"inbounds": [
  {"type": "mixed", "tag": "m", "listen": "127.0.0.1", "listen_port": 2080},
  {"type": "tun", "tag": "tun-in", "interface_name": "sb0", "address": ["172.19.0.1/30", "fdfe:dcba:9876::1/126"],
   "mtu": 9000, "auto_route": true, "strict_route": true, "stack": "system"}
], "route": {"final": "direct"}}`, `inbound "tun-in"`, 3, []string{`name = "sb0"`, `addresses = ["172.19.0.1/30", "fdfe:dcba:9876::1/126"]`, `mtu = 9000`, `auto_route = true`, `strict_route = true`}},
	}
	has := loaderHasTUN()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, problems, err := Convert([]byte(tc.in), "in")
			if err != nil {
				t.Fatal(err)
			}
			var reported bool
			for _, p := range problems {
				if p.Item == tc.item && strings.HasPrefix(p.Why, "not converted") {
					reported = true
					if p.Line != tc.line {
						t.Errorf("reported on line %d, want %d", p.Line, tc.line)
					}
					if !has && p.Why != "not converted: this version's loader has no tun inbound" {
						t.Errorf("why: %q", p.Why)
					}
				}
			}
			converted := strings.Contains(string(out), `type = "tun"`)
			switch {
			case has && (!converted || reported):
				t.Fatalf("the loader takes tun, and the inbound was not converted:\n%s\n%v", out, problems)
			case !has && (converted || !reported):
				t.Fatalf("the loader has no tun, and the inbound was not reported:\n%s\n%v", out, problems)
			}
			if has {
				for _, k := range tc.keys {
					if !strings.Contains(string(out), k+"\n") {
						t.Errorf("the tun inbound lacks %s:\n%s", k, out)
					}
				}
			}
			if _, _, err := config.Parse(out, "out"); err != nil {
				t.Fatalf("the output does not load: %v\n%s", err, out)
			}
		})
	}
}
