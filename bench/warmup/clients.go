package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"switchyard/bench/internal/benchkit"
	"switchyard/test/netem/netlab"
)

// The clients of the first-byte phase, each a SOCKS5 inbound on loopback
// and one VLESS-over-TLS outbound to the server.
const (
	// clientWarm: [warmup] preconnect = "auto", selector_pin = true; each
	// flow first waits until the API reports a pooled connection for the
	// node: the pin's pass (every 10 s) refills what the flow before took.
	clientWarm = "switchyard warm"
	// clientUnpaced: the same switchyard with flows -gap apart, waiting
	// for nothing: what a new flow meets when flows come faster than the
	// pin's pass.
	clientUnpaced = "switchyard unpaced"
	clientOff     = "switchyard off" // [warmup] preconnect = 0, selector_pin = false
	clientXray    = "xray"
	clientSing    = "sing-box"
)

var allClients = []string{clientWarm, clientUnpaced, clientOff, clientXray, clientSing}

// warmClient tells the clients with warm-up on.
func warmClient(name string) bool { return name == clientWarm || name == clientUnpaced }

func isClient(name string) bool { return contains(allClients, name) }

// firstBytes starts the client, gives it the settle time, and measures
// runs new flows to the target, gap apart.
func (l *lab) firstBytes(name string) ([]time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	socks := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := l.startClient(name, socks)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	time.Sleep(l.c.settle)
	var ds []time.Duration
	for i := range l.c.runs {
		if i > 0 {
			time.Sleep(l.c.gap)
		}
		if name == clientWarm {
			if err := netlab.WaitPooled(p.api, "xray-vless", 2*pinPass+5*time.Second); err != nil {
				return nil, fmt.Errorf("flow %d: %w (log: %s)", i, err, p.log)
			}
		}
		before := l.target.Accepted()
		d, err := netlab.TTFB(socks, l.target.Addr, l.c.flowTimeout)
		if err != nil {
			return nil, fmt.Errorf("flow %d: %w (log: %s)", i, err, p.log)
		}
		if n := l.target.Accepted() - before; n != 1 {
			return nil, fmt.Errorf("flow %d: the target accepted %d connections for it, not 1 (log: %s)", i, n, p.log)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func (l *lab) startClient(name, socks string) (*proc, error) {
	host, port, _ := net.SplitHostPort(socks)
	var (
		bin, cfg, ext string
		api           int
		err           error
	)
	switch name {
	case clientWarm, clientUnpaced, clientOff:
		bin, ext = l.c.switchyard, "toml"
		if api, err = freePort(); err != nil {
			return nil, err
		}
		cfg = l.switchyardFirstByte(socks, api, warmClient(name))
	case clientXray:
		bin, ext = l.c.xray, "json"
		cfg = fmt.Sprintf(`{"log":{"loglevel":"warning"},`+
			`"inbounds":[{"listen":%q,"port":%s,"protocol":"socks","settings":{"auth":"noauth","udp":false}}],`+
			`"outbounds":[{"protocol":"vless","settings":{"vnext":[{"address":%q,"port":%d,"users":[{"id":%q,"encryption":"none"}]}]},`+
			`"streamSettings":{"network":"tcp","security":"tls","tlsSettings":{"serverName":%q,"certificates":[{"usage":"verify","certificateFile":%q}]}}}]}`,
			host, port, l.path.PeerAddr, netlab.VLESSPort, netlab.UUID, netlab.ServerName, l.cert)
	case clientSing:
		bin, ext = l.c.singbox, "json"
		cfg = fmt.Sprintf(`{"log":{"level":"warn"},`+
			`"inbounds":[{"type":"socks","listen":%q,"listen_port":%s}],`+
			`"outbounds":[{"type":"vless","server":%q,"server_port":%d,"uuid":%q,`+
			`"tls":{"enabled":true,"server_name":%q,"certificate_path":%q}}]}`,
			host, port, l.path.PeerAddr, netlab.VLESSPort, netlab.UUID, netlab.ServerName, l.cert)
	default:
		return nil, fmt.Errorf("unknown client %q", name)
	}
	file := strings.ReplaceAll(name, " ", "-")
	path := filepath.Join(l.c.work, file+"."+ext)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	p, err := startCmd(name, filepath.Join(l.c.work, file+".log"), exec.Command(bin, "run", "-c", path))
	if err != nil {
		return nil, err
	}
	if api != 0 {
		p.api = net.JoinHostPort("127.0.0.1", strconv.Itoa(api))
	}
	if err := p.waitListening(socks, 20*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// warmupTable is switchyard's [warmup] table: on is the defaults spelled
// out, off turns warm-up off. A build whose loader refuses the table gets
// none (and has no warm-up).
func (l *lab) warmupTable(on bool) string {
	switch {
	case !l.warmInBuild:
		return ""
	case on:
		return "[warmup]\npreconnect = \"auto\"\nselector_pin = true\n"
	}
	return "[warmup]\npreconnect = 0\nselector_pin = false\n"
}

// quietHealth keeps probing out of the measurements: a raw TCP connect
// probe to each node, no UDP probe, an hour between checks. The log is at
// debug level, where warm-up logs each of its attempts.
const quietHealth = `[log]
level = "debug"

[state]
path = ""

[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
`

func (l *lab) tlsKey() string {
	return fmt.Sprintf("tls = { server_name = %q, ca_file = %q }", netlab.ServerName, l.cert)
}

// switchyardFirstByte is the first-byte phase's switchyard: the SOCKS5
// inbound routed to a Selector over the one VLESS node, and the API on
// apiPort (where the paced client reads the node's pooled connections).
func (l *lab) switchyardFirstByte(socks string, apiPort int, warm bool) string {
	return fmt.Sprintf(`%s
[api]
listen = "127.0.0.1:%d"

%s
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = %q

[[outbounds]]
tag = "xray-vless"
type = "vless"
server = %q
uuid = %q
%s

[[groups]]
tag = "pick"
policy = "selector"
members = ["xray-vless"]

[route]
final = "pick"
`, quietHealth, apiPort, l.warmupTable(warm), socks, l.serverAddr, netlab.UUID, l.tlsKey())
}

// pinPass is the selector pin's repair pass (the spec: "a 10-second pass
// repairs lost, consumed, or expired state").
const pinPass = 10 * time.Second

// switchyardTakesWarmup asks this switchyard's loader whether it takes the
// [warmup] table.
func (l *lab) switchyardTakesWarmup() (bool, error) {
	path := filepath.Join(l.c.work, "check.toml")
	cfg := strings.Replace(quietHealth, "[health]", "[warmup]\npreconnect = 0\nselector_pin = false\n\n[health]", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return false, err
	}
	out, err := exec.Command(l.c.switchyard, "check", "-c", path).CombinedOutput()
	switch {
	case err == nil:
		return true, nil
	case bytes.Contains(out, []byte("warmup")):
		return false, nil
	}
	return false, fmt.Errorf("switchyard check: %v: %s", err, out)
}

// proc is one process the harness started (benchkit.Proc); api is
// switchyard's API, where it has one.
type proc struct {
	*benchkit.Proc
	name, log string
	api       string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startCmd runs cmd as benchkit.StartProc does.
func startCmd(name, logPath string, cmd *exec.Cmd) (*proc, error) {
	bp, err := benchkit.StartProc(name, logPath, cmd)
	if err != nil {
		return nil, err
	}
	return &proc{Proc: bp, name: bp.Name, log: bp.Log, cmd: bp.Cmd, done: bp.Done}, nil
}

func (p *proc) stop() { p.Stop() }

func (p *proc) waitListening(addr string, within time.Duration) error {
	return p.WaitListening(addr, within)
}

func freePort() (int, error) { return benchkit.FreePort() }
