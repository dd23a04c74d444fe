package interop

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/test/internal/swproc"
	"switchyard/test/socksclient"
)

// A Clash node list as a subscription delivers it — VLESS over ws+tls,
// VMess over gRPC+tls, Trojan over TLS, Shadowsocks 2022, plain VLESS and
// VMess over ws, names with emoji and CJK — is imported with
// `switchyard import`, and a switchyard process started on the output
// carries TCP through each imported node to its real Xray server. Each
// node has a rule of its own (DST-PORT of its echo server) and everything
// else is rejected, so a flow that arrives was carried by that node; the
// Xray server's access log names the flow's target to prove it.
func TestImportedClashNodesReachXray(t *testing.T) {
	cert, key := tlsFiles(t)
	ssPSK := ssKey(t, 16)
	type node struct {
		name   string
		server string // the Xray config
		clash  string // the Clash proxy's keys after name, server and port
	}
	nodes := []node{
		{"🇭🇰 香港 VLESS ws+tls", "vless-ws-tls", fmt.Sprintf(`type: vless
    uuid: %s
    network: ws
    tls: true
    servername: %s
    skip-cert-verify: true
    ws-opts:
      path: %s`, interopUUID, interopHost, trWSPath)},
		{"🇯🇵 日本 VMess grpc+tls", "vmess-grpc-tls", fmt.Sprintf(`type: vmess
    uuid: %s
    alterId: 0
    cipher: auto
    network: grpc
    tls: true
    servername: %s
    skip-cert-verify: true
    grpc-opts:
      grpc-service-name: %s`, interopUUID, interopHost, trService)},
		{"🇸🇬 Trojan", "trojan-tls", fmt.Sprintf(`type: trojan
    password: %s
    sni: %s
    skip-cert-verify: true
    udp: true`, interopPassword, interopHost)},
		{"🇺🇸 SS 2022", "ss-2022", fmt.Sprintf(`type: ss
    cipher: 2022-blake3-aes-128-gcm
    password: "%s"
    udp: true`, ssPSK)},
		{"VLESS tcp", "vless-tcp", fmt.Sprintf(`type: vless
    uuid: %s`, interopUUID)},
		{"VMess ws", "vmess-ws", fmt.Sprintf(`type: vmess
    uuid: %s
    alterId: 0
    cipher: aes-128-gcm
    network: ws
    ws-opts:
      path: %s`, interopUUID, trWSPath)},
	}
	servers := map[string]func(port int) string{
		"vless-ws-tls": func(p int) string {
			return trPeerConfig("xray", "vless", trCase{transport: "ws", tls: true}, p, cert, key)
		},
		"vmess-grpc-tls": func(p int) string {
			return trPeerConfig("xray", "vmess", trCase{transport: "grpc", tls: true}, p, cert, key)
		},
		"trojan-tls": func(p int) string { return peerConfig("xray", "trojan", p, cert, key) },
		"ss-2022": func(p int) string {
			return ssServer{method: "2022-blake3-aes-128-gcm", password: ssPSK}.config("xray", p)
		},
		"vless-tcp": func(p int) string { return peerConfig("xray", "vless", p, "", "") },
		"vmess-ws":  func(p int) string { return trPeerConfig("xray", "vmess", trCase{transport: "ws"}, p, "", "") },
	}

	var proxies, rules, names strings.Builder
	peers := map[string]*peerProc{}
	echoes := map[string]string{}
	for _, n := range nodes {
		port := freePort(t)
		peers[n.name] = startKillablePeer(t, "xray", servers[n.server](port), port)
		echo := tcpEcho(t)
		echoes[n.name] = echo
		fmt.Fprintf(&proxies, "  - name: %q\n    server: 127.0.0.1\n    port: %d\n    %s\n", n.name, port, n.clash)
		fmt.Fprintf(&rules, "  - DST-PORT,%s,%s\n", echo[strings.LastIndexByte(echo, ':')+1:], n.name)
		fmt.Fprintf(&names, "%q, ", n.name)
	}
	mixed := freePort(t)
	clash := fmt.Sprintf(`mixed-port: %d
allow-lan: false
mode: rule
log-level: info
proxies:
%sproxy-groups:
  - name: "🚀 节点选择"
    type: select
    proxies: [%s]
rules:
%s  - MATCH,REJECT
`, mixed, proxies.String(), strings.TrimSuffix(names.String(), ", "), rules.String())

	dir := t.TempDir()
	in := filepath.Join(dir, "config.yaml")
	out := filepath.Join(dir, "switchyard.toml")
	if err := os.WriteFile(in, []byte(clash), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := switchyardBinary(t)
	cmd := exec.Command(bin, "import", in, "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("switchyard import: %v\n%s\n%s", err, stderr.String(), clash)
	}
	if stderr.Len() > 0 {
		t.Fatalf("switchyard import reported problems for a list it can convert whole:\n%s", stderr.String())
	}
	toml, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !bytes.Contains(toml, []byte(fmt.Sprintf("tag = %q", n.name))) {
			t.Fatalf("no outbound %q in the output:\n%s", n.name, toml)
		}
	}

	p := swproc.StartCmd(t, exec.Command(bin, "run", "-c", out))
	proxy := p.Addr("mixed-in")
	for _, n := range nodes {
		t.Run(n.server, func(t *testing.T) {
			checkTCPTo(t, proxy, echoes[n.name])
			// The node's own server logs the flow's target; no other does.
			deadline := time.Now().Add(2 * time.Second)
			for !acceptedBy(peers[n.name], echoes[n.name]) {
				if time.Now().After(deadline) {
					t.Fatalf("the server of %q did not log the flow to %s\nthe imported configuration:\n%s", n.name, echoes[n.name], toml)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for other, peer := range peers {
				if other != n.name && acceptedBy(peer, echoes[n.name]) {
					t.Fatalf("the flow for %q was carried by %q's server", n.name, other)
				}
			}
		})
	}
	// Anything else is rejected (MATCH,REJECT).
	if c, err := socksclient.DialWithin(proxy, tcpEcho(t), "", "", 10*time.Second); err == nil {
		c.Close()
		t.Fatal("a flow matching no node's rule was accepted, though MATCH,REJECT was imported")
	}
}

// acceptedBy says whether the Xray server's access log shows a flow to
// target ("accepted tcp:host:port", or without "tcp:" for Shadowsocks 2022).
func acceptedBy(p *peerProc, target string) bool {
	logs := p.logs.String()
	return strings.Contains(logs, "accepted tcp:"+target) || strings.Contains(logs, "accepted "+target)
}
