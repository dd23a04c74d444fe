package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// upstream is one upstream SOCKS5 server: an Xray process with a socks
// inbound and a freedom outbound that sends from its own loopback address,
// so the destination can tell which upstream carried a flow.
type upstream struct {
	name string // the router's outbound tag: "a" or "b"
	ip   string // sendThrough address
	port int
	conf string
	log  string
	p    *proc
}

func writeXray(dir string, u *upstream) error {
	u.conf = filepath.Join(dir, "xray-"+u.name+".json")
	return os.WriteFile(u.conf, fmt.Appendf(nil, `{
  "log": { "loglevel": "warning", "access": "none" },
  "inbounds": [
    {
      "tag": "socks-in",
      "listen": "127.0.0.1",
      "port": %d,
      "protocol": "socks",
      "settings": { "auth": "noauth", "udp": false }
    }
  ],
  "outbounds": [
    { "tag": "direct", "protocol": "freedom", "sendThrough": %q }
  ]
}
`, u.port, u.ip), 0o644)
}

func (u *upstream) start(xray string) error {
	p, err := startProc("xray-"+u.name, u.log, xray, "run", "-c", u.conf)
	if err != nil {
		return err
	}
	u.p = p
	if err := p.waitListening(loopback(u.port), 10*time.Second); err != nil {
		p.kill()
		return err
	}
	return nil
}

// router is one router under test with a SOCKS5 inbound and a urltest
// group over the outbounds "a" and "b" (SOCKS5 clients of the upstreams).
type router struct {
	name string
	bin  string
	// interval is the group's check interval: set (the -interval flag) or
	// the router's own default.
	interval    time.Duration
	setInterval bool
	logLevel    string // switchyard's [log] level
	write       func(r *router, dir string, port int, ups [2]*upstream, probeURL string) (args []string, err error)
}

// switchyardDefaultInterval and singboxDefaultInterval are the routers'
// default check intervals ([health] check_interval; sing-box's
// C.DefaultURLTestInterval).
const (
	switchyardDefaultInterval = 30 * time.Second
	singboxDefaultInterval    = 3 * time.Minute
)

func writeSwitchyard(r *router, dir string, port int, ups [2]*upstream, probeURL string) ([]string, error) {
	interval := ""
	if r.setInterval {
		interval = fmt.Sprintf("check_interval = %q\n", r.interval.String())
	}
	conf := filepath.Join(dir, "switchyard.toml")
	err := os.WriteFile(conf, fmt.Appendf(nil, `[log]
level = %q

[state]
path = ""

[health]
tcp_check_url = [%q]
udp_check_dns = []
%s
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:%d"

[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:%d"

[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:%d"

[[groups]]
tag = "auto"
policy = "urltest"
members = ["a", "b"]
tolerance = "50ms"

[route]
final = "auto"
`, r.logLevel, probeURL, interval, port, ups[0].port, ups[1].port), 0o644)
	return []string{"run", "-c", conf}, err
}

func writeSingbox(r *router, dir string, port int, ups [2]*upstream, probeURL string) ([]string, error) {
	interval := ""
	if r.setInterval {
		interval = fmt.Sprintf(`, "interval": %q`, r.interval.String())
	}
	conf := filepath.Join(dir, "sing-box.json")
	err := os.WriteFile(conf, fmt.Appendf(nil, `{
  "log": { "level": "warn" },
  "inbounds": [ { "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": %d } ],
  "outbounds": [
    { "type": "urltest", "tag": "auto", "outbounds": ["a", "b"], "url": %q%s },
    { "type": "socks", "tag": "a", "server": "127.0.0.1", "server_port": %d },
    { "type": "socks", "tag": "b", "server": "127.0.0.1", "server_port": %d }
  ],
  "route": { "final": "auto" }
}
`, port, probeURL, interval, ups[0].port, ups[1].port), 0o644)
	return []string{"run", "-c", conf}, err
}
