package netlab

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A ScoreLab is the scene of the Score end-to-end test and of bench/score:
// two real Xray servers as two nodes and a set of HTTP sites both reach.
//
//	                      ┌─ loopback ─ Xray "A" ──────────────┐  (blocks some sites)
//	client ── switchyard ─┤                                   ├── sites (on the link's root end)
//	   (root namespace)   └═ link, Delay each way ═ Xray "B" ─┘  (in the lab's namespace)
//
// Node A is an Xray server in the root namespace on loopback: the short
// path. Its routing sends the blocked sites to a blackhole, so a flow to
// one of them through A passes the proxy's setup and then ends without a
// response byte (a target-path failure behind a working proxy). Node B is
// an Xray server inside the namespace, reached over the delayed link, and
// serves every site. The sites listen on the root namespace's end of the
// link (an address of the lab's own device): A reaches them locally, B
// across the link, so every round trip B's flows pay is on the link.
// A's connections to the sites come from 127.0.0.1 (sendThrough), B's
// from the namespace's end of the link, and the sites record each
// request's source: which node carried a flow is read from the servers'
// side. Both servers take VLESS over TLS, with the same account and
// certificate, and write an access log.
type ScoreLab struct {
	Path     *Path    // node B's delayed link and namespace
	Sites    *Sites   // Open then Blocked, in Sites.Addrs order
	Open     []string // sites both nodes serve
	Blocked  []string // sites node A blackholes
	ProbeURL string   // the health probe URL, served by the sites' address
	NodeA    string   // node A's VLESS over TLS server, host:port
	NodeB    string   // node B's
	SourceA  netip.Addr
	SourceB  netip.Addr
	Cert     string // the servers' certificate, their clients' CA

	dir       string
	probe     *Sites
	servers   []*server
	closeOnce sync.Once
	closeErr  error
}

// ScoreLabConfig says how to build a ScoreLab.
type ScoreLabConfig struct {
	Xray    string        // the Xray binary
	Dir     string        // where the configs, the certificate and the logs go
	Delay   time.Duration // node B's link, each way
	Open    int           // sites both nodes serve
	Blocked int           // sites node A blackholes
}

// NewScoreLab builds the lab and waits until both servers accept. It needs
// root (the namespace). Close undoes everything; on an error NewScoreLab
// has undone what it did.
func NewScoreLab(c ScoreLabConfig) (_ *ScoreLab, err error) {
	if c.Open < 1 || c.Blocked < 1 {
		return nil, errors.New("a Score lab needs at least one open and one blocked site")
	}
	l := &ScoreLab{dir: c.Dir, SourceA: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.Path, err = New(c.Delay); err != nil {
		return nil, err
	}
	l.SourceB = l.Path.PeerAddr
	if l.Sites, err = StartSites(l.Path.HostAddr, c.Open+c.Blocked); err != nil {
		return nil, err
	}
	l.Open, l.Blocked = l.Sites.Addrs[:c.Open], l.Sites.Addrs[c.Open:]
	if l.probe, err = StartSites(l.Path.HostAddr, 1); err != nil {
		return nil, err
	}
	l.ProbeURL = "http://" + l.probe.Addrs[0] + ProbePath
	cert, key, err := WriteCert(c.Dir)
	if err != nil {
		return nil, err
	}
	l.Cert = cert
	var blocked []netip.AddrPort
	for _, s := range l.Blocked {
		blocked = append(blocked, netip.MustParseAddrPort(s))
	}
	portA, err := rootFreePort()
	if err != nil {
		return nil, err
	}
	l.NodeA = fmt.Sprintf("127.0.0.1:%d", portA)
	l.NodeB = fmt.Sprintf("%s:%d", l.Path.PeerAddr, VLESSPort)
	a := XrayRouting{Ports: map[string]int{"vless": portA, "trojan": 0}, Blocked: blocked,
		SendThrough: l.SourceA, AccessLog: filepath.Join(c.Dir, "xray-a.access.log")}
	b := XrayRouting{Ports: map[string]int{"trojan": 0},
		SendThrough: l.SourceB, AccessLog: filepath.Join(c.Dir, "xray-b.access.log")}
	for _, s := range []struct {
		name string
		addr netip.Addr
		r    XrayRouting
		ns   bool
	}{{"a", l.SourceA, a, false}, {"b", l.Path.PeerAddr, b, true}} {
		cfg, err := s.r.Apply(XrayServer(s.addr, cert, key, 1))
		if err != nil {
			return nil, err
		}
		path := filepath.Join(c.Dir, "xray-"+s.name+".json")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		cmd := exec.Command(c.Xray, "run", "-c", path)
		if s.ns {
			cmd = l.Path.Command(c.Xray, "run", "-c", path)
		}
		srv, err := startServer("xray-"+s.name, filepath.Join(c.Dir, "xray-"+s.name+".log"), cmd)
		if err != nil {
			return nil, err
		}
		l.servers = append(l.servers, srv)
	}
	for i, addr := range []string{l.NodeA, l.NodeB} {
		if err := l.servers[i].waitListening(addr, 15*time.Second); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close stops the servers and the sites and removes the namespace. It may
// be called more than once, from any goroutine: every call returns once
// the first is done.
func (l *ScoreLab) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *ScoreLab) close() error {
	for _, s := range l.servers {
		s.stop()
	}
	l.servers = nil
	if l.Sites != nil {
		l.Sites.Close()
	}
	if l.probe != nil {
		l.probe.Close()
	}
	if l.Path != nil {
		return l.Path.Close()
	}
	return nil
}

// Logs is both servers' logs, for a failure's report.
func (l *ScoreLab) Logs() string {
	var b strings.Builder
	for _, name := range []string{"xray-a.log", "xray-b.log", "xray-a.access.log", "xray-b.access.log"} {
		out, _ := os.ReadFile(filepath.Join(l.dir, name))
		fmt.Fprintf(&b, "--- %s\n%s", name, out)
	}
	return b.String()
}

// Access counts the lines of node's access log ("a" or "b") that accepted
// a request for site, and those the blackhole took.
func (l *ScoreLab) Access(node, site string) (accepted, blackholed int) {
	out, _ := os.ReadFile(filepath.Join(l.dir, "xray-"+node+".access.log"))
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, " accepted tcp:"+site+" ") {
			continue
		}
		accepted++
		if strings.HasSuffix(strings.TrimSpace(line), "[blocked]") || strings.Contains(line, "-> blocked]") {
			blackholed++
		}
	}
	return accepted, blackholed
}

// Node names the node whose connection brought a site a request from
// src: "A", "B", or "" for neither.
func (l *ScoreLab) Node(src netip.Addr) string {
	switch src {
	case l.SourceA:
		return "A"
	case l.SourceB:
		return "B"
	}
	return ""
}

// The outbound tags SwitchyardConfig gives the nodes, and its inbound's.
const (
	OutboundA   = "node-a"
	OutboundB   = "node-b"
	LabInbound  = "mixed-in"
	LabGroupTag = "pick"
)

// SwitchyardConfig is a switchyard config for the lab: a mixed inbound on
// listen (a loopback address; port 0 has the ready line name it) routed to the group LabGroupTag of policy over the two nodes
// (VLESS over TLS, the lab's certificate as CA), the API on apiPort,
// health probing with the lab's probe URL every checkInterval and no UDP
// probe, warm-up's preconnect off (every flow connects afresh, so the
// figures are the selection's), no state file.
func (l *ScoreLab) SwitchyardConfig(policy, listen string, apiPort int, checkInterval time.Duration) string {
	tls := fmt.Sprintf("tls = { server_name = %q, ca_file = %q }", ServerName, l.Cert)
	return fmt.Sprintf(`[log]
level = "debug"

[api]
listen = "127.0.0.1:%d"

[state]
path = ""

[health]
tcp_check_url = [%q]
udp_check_dns = []
check_interval = %q

[warmup]
preconnect = 0
selector_pin = false

[[inbounds]]
tag = %q
type = "mixed"
listen = %q

[[outbounds]]
tag = %q
type = "vless"
server = %q
uuid = %q
%s

[[outbounds]]
tag = %q
type = "vless"
server = %q
uuid = %q
%s

[[groups]]
tag = %q
policy = %q
members = [%q, %q]

[route]
final = %q
`, apiPort, l.ProbeURL, checkInterval.String(), LabInbound, listen,
		OutboundA, l.NodeA, UUID, tls, OutboundB, l.NodeB, UUID, tls,
		LabGroupTag, policy, OutboundA, OutboundB, LabGroupTag)
}

// rootFreePort returns a loopback TCP port nothing listens on, below the
// kernel's ephemeral range (which other processes' outgoing connections
// draw from).
func rootFreePort() (int, error) {
	for range 200 {
		port := 20000 + mrand.IntN(12768)
		ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port")
}

// server is one Xray server process of the lab.
type server struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer(name, logPath string, cmd *exec.Cmd) (*server, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// stop kills the server (ip netns exec execs Xray: the pid is Xray's) and
// waits for it.
func (s *server) stop() {
	s.cmd.Process.Kill()
	<-s.done
}

func (s *server) waitListening(addr string, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before listening on %s", s.name, addr)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s does not listen on %s after %v: %w", s.name, addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
