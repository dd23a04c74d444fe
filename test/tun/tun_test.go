// Package tun runs the real switchyard binary with a TUN inbound inside a
// network namespace of its own, whose traffic auto_route sends into the
// device, and drives real clients (curl, UDP and DNS sockets) there
// against servers in a second namespace. It needs root and iproute2.
package tun_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"switchyard/test/internal/swproc"
)

var bin string // the switchyard binary, built with the race detector

// plainBin is the switchyard binary built without the race detector, for
// the soak, once plainBuilt is closed ("" when the build failed): at its scale the detector's
// slowdown (several times the CPU per packet) on a shared 2-core machine
// would measure the detector, not the flows, and its shadow memory would
// hide the process's own. It is built while the other tests run.
var (
	plainBin   string
	plainBuilt = make(chan struct{})
)

func TestMain(m *testing.M) {
	var dir string
	var err error
	if bin, dir, err = swproc.Build("switchyard-tun"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		defer close(plainBuilt)
		plain := filepath.Join(dir, "plain", "switchyard")
		out, err := exec.Command("go", "build", "-o", plain, "switchyard/cmd/switchyard").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building switchyard without -race: %v\n%s", err, out)
			return
		}
		plainBin = plain
	}()
	code := m.Run()
	<-plainBuilt
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// config is switchyard's configuration in the lab: a TUN with auto_route
// and DNS hijack, the DNS service asking the servers' DNS server, and
// rules that block TCP port 8081 and UDP port 7003.
func (l *lab) config(extra string) string {
	return fmt.Sprintf(`[log]
level = "debug"

[dns]
servers = ["udp://%s:53"]

[[inbounds]]
tag = "tun-in"
type = "tun"
name = "sytun0"
addresses = ["172.19.0.1/30"]
mtu = 1500
auto_route = true
%s
[[rules]]
port = [8081, 7003]
outbound = "block"
`, l.web, extra)
}

// start runs switchyard in the client's namespace on the configuration in
// path (written from text).
func (l *lab) start(t *testing.T, path, text string) *swproc.Proc {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return swproc.StartCmd(t, exec.Command("ip", "netns", "exec", l.client, bin, "run", "-c", path))
}

// curl runs curl in the client's namespace.
func (l *lab) curl(url string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", l.client, "curl", "-sS", "--max-time", "5", url).CombinedOutput()
	return string(out), err
}

// linkIndex is the TUN device's index in the client's namespace, 0 when
// there is none.
func (l *lab) linkIndex() int {
	var idx int
	in(l.client, func() error {
		if ifi, err := net.InterfaceByName("sytun0"); err == nil {
			idx = ifi.Index
		}
		return nil
	})
	return idx
}

// installed is what auto_route left in the client's namespace: its policy
// rules and the routes of its table.
func (l *lab) installed(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	rules, err := exec.Command("ip", "-n", l.client, "-4", "rule", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip rule: %v: %s", err, rules)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(line, "9000:") || strings.HasPrefix(line, "9001:") || strings.HasPrefix(line, "9002:") {
			b.WriteString(line + "\n")
		}
	}
	routes, err := exec.Command("ip", "-n", l.client, "-4", "route", "show", "table", "2022").CombinedOutput()
	if err != nil && !bytes.Contains(routes, []byte("FIB table does not exist")) {
		t.Fatalf("ip route: %v: %s", err, routes)
	}
	if err == nil {
		b.Write(routes)
	}
	return b.String()
}

// Without switchyard nothing in the client's namespace reaches the
// servers: the lab itself proves that what does reach them went through it.
func TestLabHasNoRouteWithoutTheTUN(t *testing.T) {
	l := newLab(t)
	l.webServer(t, l.web+":8080")
	if out, err := l.curl("http://" + l.web + ":8080/"); err == nil {
		t.Fatalf("curl reached the server without the TUN: %s", out)
	}
}

// curl reaches the web server through the TUN, at the address it asked
// for; a blocked port is refused at once; UDP to two peers from one socket
// comes back from each; a blocked UDP port gets nothing; a DNS query to an
// arbitrary address is answered by the DNS service, which asked the
// servers' DNS server.
func TestTrafficThroughTheTUN(t *testing.T) {
	l := newLab(t)
	l.webServer(t, l.web+":8080")
	l.webServer(t, l.web+":8081")
	l.udpEcho(t, l.web+":7001")
	l.udpEcho(t, l.peer2+":7001")
	l.udpEcho(t, l.web+":7003")
	asked := l.dnsServer(t, l.web+":53", "web.test", l.web)
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config(""))

	out, err := l.curl("http://" + l.web + ":8080/")
	if err != nil || out != l.web+":8080" {
		t.Fatalf("curl through the TUN: %q, %v\n%s", out, err, sw.Logs)
	}
	start := time.Now()
	if out, err := l.curl("http://" + l.web + ":8081/"); err == nil {
		t.Fatalf("curl reached a blocked port: %q", out)
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("a blocked port: %q, %v (want curl's exit 7, could not connect)", out, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the refusal took %v", d)
	}

	err = in(l.client, func() error {
		c, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer c.Close()
		for _, peer := range []string{l.web + ":7001", l.peer2 + ":7001"} {
			to, _ := net.ResolveUDPAddr("udp", peer)
			var got string
			for try := 0; try < 5 && got == ""; try++ { // UDP: the first may race the association
				c.WriteTo([]byte("ping"), to)
				c.SetReadDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 512)
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					continue
				}
				if from.String() != peer {
					return fmt.Errorf("reply from %s, sent to %s", from, peer)
				}
				got = string(buf[:n])
			}
			if got != peer+" ping" {
				return fmt.Errorf("udp %s: got %q", peer, got)
			}
		}
		blocked, _ := net.ResolveUDPAddr("udp", l.web+":7003")
		c.WriteTo([]byte("ping"), blocked)
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, from, err := c.ReadFrom(make([]byte, 512)); err == nil {
			return fmt.Errorf("a blocked port answered %d bytes from %s", n, from)
		}

		m := new(dns.Msg)
		m.SetQuestion("web.test.", dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, "203.0.113.53:53")
		if err != nil {
			return fmt.Errorf("dns to an arbitrary address: %w", err)
		}
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != l.web {
			return fmt.Errorf("dns answer %v", r)
		}
		r, _, err = (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(m, "198.51.100.53:53")
		if err != nil || len(r.Answer) != 1 {
			return fmt.Errorf("dns over tcp to an arbitrary address: %v, %v", r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, sw.Logs)
	}
	if asked.Load() == 0 {
		t.Fatal("the servers' DNS server saw no query: the answer did not come from the DNS service")
	}
}

// auto_route's rules and routes are there while switchyard runs and gone
// after SIGTERM; after SIGKILL a restart finds the stale rules and leaves
// one set; a reload that keeps the TUN keeps its device and an open
// connection, one that changes it recreates the device, and one that
// removes it removes its rules.
func TestAutoRouteAndReload(t *testing.T) {
	l := newLab(t)
	l.tcpEcho(t, l.web+":9000")
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	path := filepath.Join(t.TempDir(), "sy.toml")
	if got := l.installed(t); got != "" {
		t.Fatalf("entries before the start:\n%s", got)
	}

	sw := l.start(t, path, l.config(""))
	running := l.installed(t)
	for _, want := range []string{"9000:\tnot from all fwmark " + swMark + " lookup 2022", "default dev sytun0", "throw 172.19.0.0/30"} {
		if !strings.Contains(running, want) {
			t.Fatalf("no %q among the installed entries:\n%s", want, running)
		}
	}
	if _, err := sw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := l.installed(t); got != "" {
		t.Fatalf("entries left after SIGTERM:\n%s", got)
	}

	sw = l.start(t, path, l.config(""))
	sw.Cmd.Process.Kill()
	<-sw.Done
	stale := l.installed(t)
	if !strings.Contains(stale, "9000:") {
		t.Fatalf("SIGKILL left no rule behind (the restart test proves nothing):\n%s", stale)
	}
	sw = l.start(t, path, l.config(""))
	if got := l.installed(t); got != running {
		t.Fatalf("after a crash and a restart:\n%s\nwant\n%s", got, running)
	}

	// An open connection through the TUN, then a reload that changes only
	// the rules: same device, the connection still echoes.
	idx := l.linkIndex()
	var conn net.Conn
	if err := in(l.client, func() (err error) { conn, err = net.DialTimeout("tcp", l.web+":9000", 5*time.Second); return }); err != nil {
		t.Fatalf("%v\n%s", err, sw.Logs)
	}
	defer conn.Close()
	echo := func(msg string) error {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := conn.Read(buf); err != nil || string(buf) != msg {
			return fmt.Errorf("echo %q: %v", buf, err)
		}
		return nil
	}
	if err := echo("before"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte(l.config("")+"\n[[rules]]\nport = [9999]\noutbound = \"block\"\n"), 0o600)
	sw.Cmd.Process.Signal(syscall.SIGHUP)
	sw.WaitLog("reload applied", 1, 10*time.Second)
	if got := l.linkIndex(); got != idx {
		t.Fatalf("a reload that kept the TUN replaced its device (index %d, was %d)", got, idx)
	}
	if err := echo("after"); err != nil {
		t.Fatalf("the connection did not survive a reload that kept the TUN: %v", err)
	}

	os.WriteFile(path, []byte(strings.Replace(l.config(""), "mtu = 1500", "mtu = 1400", 1)), 0o600)
	sw.Cmd.Process.Signal(syscall.SIGHUP)
	sw.WaitLog("reload applied", 2, 10*time.Second)
	if got := l.linkIndex(); got == idx || got == 0 {
		t.Fatalf("a changed TUN kept its device (index %d, was %d)\n%s", got, idx, sw.Logs)
	}
	if got := l.installed(t); !strings.Contains(got, "9000:") {
		t.Fatalf("the recreated TUN has no rules:\n%s", got)
	}

	os.WriteFile(path, []byte(fmt.Sprintf("[dns]\nservers = [\"udp://%s:53\"]\n", l.web)), 0o600)
	sw.Cmd.Process.Signal(syscall.SIGHUP)
	sw.WaitLog("reload applied", 3, 10*time.Second)
	if got := l.installed(t); got != "" {
		t.Fatalf("entries left after a reload removed the TUN:\n%s", got)
	}
	if l.linkIndex() != 0 {
		t.Fatal("the device outlived the reload that removed its inbound")
	}
}

// Without CAP_NET_ADMIN switchyard does not start, and says which
// capability it lacks.
func TestNoCapabilityIsNamed(t *testing.T) {
	l := newLab(t)
	path := filepath.Join(t.TempDir(), "sy.toml")
	if err := os.WriteFile(path, []byte("[[inbounds]]\ntag = \"tun-in\"\ntype = \"tun\"\nname = \"sytun0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", l.client, "setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin", bin, "run", "-c", path)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("without CAP_NET_ADMIN: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("the process needs CAP_NET_ADMIN")) || !bytes.Contains(out, []byte("operation not permitted")) {
		t.Fatalf("the error does not name the capability:\n%s", out)
	}
	if l.linkIndex() != 0 {
		t.Fatal("a device was left behind")
	}
}

// route_address routes only its prefixes into the device and
// route_exclude_address keeps its own out of it.
func TestRouteAddressAndExclude(t *testing.T) {
	l := newLab(t)
	l.webServer(t, l.web+":8080")
	l.webServer(t, l.peer2+":8080")
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	prefix := l.web[:strings.LastIndexByte(l.web, '.')] + ".0/24"
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), l.config(fmt.Sprintf("route_address = [%q]\nroute_exclude_address = [\"%s/32\"]\n", prefix, l.peer2)))
	got := l.installed(t)
	for _, want := range []string{prefix + " dev sytun0", "throw " + l.peer2} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %q among the installed entries:\n%s", want, got)
		}
	}
	if strings.Contains(got, "default dev sytun0") {
		t.Fatalf("a default route with route_address set:\n%s", got)
	}
	if out, err := l.curl("http://" + l.web + ":8080/"); err != nil || out != l.web+":8080" {
		t.Fatalf("curl to a routed prefix: %q, %v\n%s", out, err, sw.Logs)
	}
	if out, err := l.curl("http://" + l.peer2 + ":8080/"); err == nil {
		t.Fatalf("curl to an excluded address went through the device: %q", out)
	}
}

// A reload that adds a TUN to a process without CAP_NET_ADMIN is refused,
// naming the capability, and the running configuration stays.
func TestReloadWithoutCapabilityKeepsTheRunningState(t *testing.T) {
	l := newLab(t)
	path := filepath.Join(t.TempDir(), "sy.toml")
	mixed := "[[inbounds]]\ntag = \"mixed-in\"\ntype = \"mixed\"\nlisten = \"127.0.0.1:0\"\n"
	if err := os.WriteFile(path, []byte(mixed), 0o600); err != nil {
		t.Fatal(err)
	}
	sw := swproc.StartCmd(t, exec.Command("ip", "netns", "exec", l.client, "setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin", bin, "run", "-c", path))
	addr := sw.Addr("mixed-in")
	os.WriteFile(path, []byte(mixed+"[[inbounds]]\ntag = \"tun-in\"\ntype = \"tun\"\nname = \"sytun0\"\n"), 0o600)
	sw.Cmd.Process.Signal(syscall.SIGHUP)
	sw.WaitLog("reload refused", 1, 10*time.Second)
	if !strings.Contains(sw.Logs.String(), "the process needs CAP_NET_ADMIN") {
		t.Fatalf("the refusal does not name the capability:\n%s", sw.Logs)
	}
	if l.linkIndex() != 0 {
		t.Fatal("a refused reload left a device")
	}
	err := in(l.client, func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatalf("the running inbound is gone after the refused reload: %v", err)
	}
}
