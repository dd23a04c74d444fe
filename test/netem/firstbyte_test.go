package netem

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/test/netem/netlab"
)

// Time to the first byte of a new flow through a Selector over a distant
// Xray server, warm-up off and on (issue 15, "End to end with latency").
//
// The topology and the round trips each leg pays (RTT = 100 ms):
//
//	client ──loopback── switchyard ══ link, 50 ms each way ══ Xray ──ns loopback── target
//	  (root namespace)                                         (the test's namespace)
//
// The client and switchyard share the root namespace: the SOCKS5 handshake
// costs nothing measurable. Xray and the HTTP target share the namespace:
// Xray's connection to the target is local to it, so the target's own round
// trip is about zero and every round trip measured is one across the link.
// A new flow then pays:
//
//	warm-up off: TCP connect (1 RTT) + TLS 1.3 handshake (1 RTT)
//	             + the request with the VLESS/Trojan header and its answer (1 RTT) ≈ 3 RTT
//	warm-up on:  a pooled connection whose TLS is complete: the request and
//	             its answer only ≈ 1 RTT (a pooled bare TCP connection: 2 RTT)
//
// The test asserts only the ordering, with a margin of half a round trip
// (at least one saved round trip must show through any noise), and logs
// every figure. Every measured flow is a new one: a new TCP connection to
// the SOCKS5 inbound, and the target counts a new connection for it. A
// flow consumes the pinned connection and the pin's next pass (10 s)
// replaces it, so each warm flow waits until the native API reports its
// node's pooled connection again.
func TestFirstByteWithLatency(t *testing.T) {
	const delay = 50 * time.Millisecond
	path := newPath(t, delay)
	t.Logf("link: %s; %v each way, RTT %v; namespace %s, server %s", path.Mode, delay, path.RTT(), path.NS, path.PeerAddr)
	target, err := path.StartTarget()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	cert := startXray(t, path)

	if out, ok := check(t, switchyardConfig(path, cert, false, 0)); !ok {
		if !strings.Contains(out, "warmup") {
			t.Fatalf("switchyard check refused the config:\n%s", out)
		}
		// This build has no warm-up: without the table the flows are what
		// "off" is, measured for the record; the test fails, as it must
		// without the feature.
		absent := func(api int) string {
			return strings.Replace(switchyardConfig(path, cert, false, api), warmupTable(false), "", 1)
		}
		off := measureFirstByte(t, target, absent, false)
		logFigures(t, "warm-up absent", off)
		t.Fatalf("this build's loader refuses [warmup] (no warm-up to measure):\n%s", out)
	}
	off := measureFirstByte(t, target, func(api int) string { return switchyardConfig(path, cert, false, api) }, false)
	on := measureFirstByte(t, target, func(api int) string { return switchyardConfig(path, cert, true, api) }, true)
	logFigures(t, "warm-up off", off)
	logFigures(t, "warm-up on", on)
	for _, proto := range protocols {
		offMed, onMed := median(off[proto]), median(on[proto])
		t.Logf("%s: off − on = %v (%.1f RTT saved)", proto, offMed-onMed, float64(offMed-onMed)/float64(path.RTT()))
		if offMed-onMed < path.RTT()/2 {
			t.Errorf("%s: the first byte of a new flow came after %v with warm-up on and %v with it off: not one round trip (%v) saved (half of one is the margin); link: %s",
				proto, onMed, offMed, path.RTT(), path.Mode)
		}
	}
}

var protocols = []string{"vless-tls", "trojan"}

// nodes are the outbound tags of the protocols' nodes.
var nodes = map[string]string{"vless-tls": "xray-vless", "trojan": "xray-trojan"}

const (
	samples = 3 // new flows measured per protocol and mode
	// pinPass is the selector pin's repair pass (the spec: "a 10-second
	// pass repairs lost, consumed, or expired state"): a flow consumes the
	// pinned connection, the next pass opens another.
	pinPass   = 10 * time.Second
	flowLimit = 10 * time.Second // one measured flow's bound
	offGap    = 200 * time.Millisecond
)

// measureFirstByte runs switchyard on config (given its API's port), then
// opens samples new flows per protocol to the target and returns their
// times to the first byte.
// With warm, each flow first waits until the API reports a pooled
// connection for its node (the pin's pass refills what the flow before
// took), so every warm flow meets what warm-up keeps, not a pool the
// previous flow emptied; without, flows follow each other offGap apart
// and no node may report a pooled connection, nor warm-up log an attempt.
func measureFirstByte(t *testing.T, target *netlab.Target, config func(apiPort int) string, warm bool) map[string][]time.Duration {
	t.Helper()
	api := freePort(t)
	sy := startSwitchyard(t, config(api))
	sy.api = fmt.Sprintf("127.0.0.1:%d", api)
	defer sy.Stop()
	got := map[string][]time.Duration{}
	for i := range samples {
		if i > 0 && !warm {
			time.Sleep(offGap)
		}
		for _, proto := range protocols {
			if warm {
				if err := netlab.WaitPooled(sy.api, nodes[proto], 2*pinPass+5*time.Second); err != nil {
					t.Fatalf("%s flow %d: %v", proto, i, err)
				}
			}
			before := target.Accepted()
			d, err := netlab.TTFB(sy.addr("socks-"+proto), target.Addr, flowLimit)
			if err != nil {
				t.Fatalf("%s flow %d: %v", proto, i, err)
			}
			if n := target.Accepted() - before; n != 1 {
				t.Fatalf("%s flow %d: the target accepted %d connections for it, want 1 (a new flow)", proto, i, n)
			}
			got[proto] = append(got[proto], d)
		}
	}
	for _, proto := range protocols {
		// On, the pin's attempts are logged (which keeps the count below
		// honest); off, there is none.
		if n := sy.warmOpened(nodes[proto]); warm && n == 0 {
			t.Errorf("warm-up on, yet no warm attempt logged for %s", nodes[proto])
		}
	}
	if !warm {
		for _, proto := range protocols {
			if n := sy.warmOpened(nodes[proto]); n != 0 {
				t.Errorf("warm-up off, yet %d warm attempts opened a connection to %s", n, nodes[proto])
			}
			if n, _, err := netlab.Pooled(sy.api, nodes[proto]); err != nil || n != 0 {
				t.Errorf("warm-up off, yet %s reports %d pooled connections (%v)", nodes[proto], n, err)
			}
		}
	}
	return got
}

func logFigures(t *testing.T, mode string, figures map[string][]time.Duration) {
	t.Helper()
	for _, proto := range protocols {
		var s []string
		for _, d := range figures[proto] {
			s = append(s, d.Round(time.Millisecond).String())
		}
		t.Logf("%s, %s: first byte after %s (median %v)", mode, proto, strings.Join(s, ", "), median(figures[proto]).Round(time.Millisecond))
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// warmupTable is the [warmup] table of a run: on is the defaults spelled
// out (preconnect "auto", the selector pin on), off turns both off.
func warmupTable(on bool) string {
	if on {
		return "[warmup]\npreconnect = \"auto\"\nselector_pin = true\n"
	}
	return "[warmup]\npreconnect = 0\nselector_pin = false\n"
}

// switchyardConfig has one SOCKS5 inbound per protocol, each routed to a
// Selector over one node of the Xray server: VLESS over TLS, Trojan. Health
// probing stays quiet: a raw TCP connect probe, no UDP probe, an hour
// between checks.
func switchyardConfig(path *netlab.Path, cert string, warm bool, apiPort int) string {
	tls := fmt.Sprintf("tls = { server_name = %q, ca_file = %q }", netlab.ServerName, cert)
	return fmt.Sprintf(`[log]
level = "debug"

[api]
listen = "127.0.0.1:%d"

[state]
path = ""

[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"

%s
[[inbounds]]
tag = "socks-vless-tls"
type = "socks"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "socks-trojan"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "xray-vless"
type = "vless"
server = "%s:%d"
uuid = %q
%s

[[outbounds]]
tag = "xray-trojan"
type = "trojan"
server = "%s:%d"
password = %q
%s

[[groups]]
tag = "pick-vless"
policy = "selector"
members = ["xray-vless"]

[[groups]]
tag = "pick-trojan"
policy = "selector"
members = ["xray-trojan"]

[[rules]]
inbound = ["socks-trojan"]
outbound = "pick-trojan"

[route]
final = "pick-vless"
`, apiPort, warmupTable(warm), path.PeerAddr, netlab.VLESSPort, netlab.UUID, tls, path.PeerAddr, netlab.TrojanPort, netlab.Password, tls)
}
