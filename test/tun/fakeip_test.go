package tun_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// xrayBin is the pinned Xray of scripts/peers.sh.
func xrayBin(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out, err := exec.Command(filepath.Join(filepath.Dir(file), "..", "..", "scripts", "peers.sh"), "path", "xray").Output()
	if err != nil {
		t.Fatalf("locating xray: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("xray is not installed (%v); run scripts/peers.sh install (the README's test command does)", err)
	}
	return bin
}

// xraySOCKS runs a real Xray SOCKS5 server (TCP and UDP) on addr:1080 in
// the servers' namespace, resolving name to ip, and returns its access
// log's path.
func (l *lab) xraySOCKS(t *testing.T, name, ip string) string {
	t.Helper()
	dir := t.TempDir()
	access := filepath.Join(dir, "access.log")
	cfg := fmt.Sprintf(`{
  "log": {"loglevel": "warning", "access": %q},
  "dns": {"hosts": {%q: %q}},
  "inbounds": [{"listen": %q, "port": 1080, "protocol": "socks",
    "settings": {"auth": "noauth", "udp": true, "ip": %q}}],
  "outbounds": [{"protocol": "freedom", "settings": {"domainStrategy": "UseIP"}}]
}`, access, name, ip, l.web, l.web)
	path := filepath.Join(dir, "xray.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", l.server, xrayBin(t), "run", "-c", path)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		var c net.Conn
		err := in(l.server, func() (err error) { c, err = net.DialTimeout("tcp", l.web+":1080", time.Second); return })
		if err == nil {
			c.Close()
			return access
		}
		if time.Now().After(deadline) {
			t.Fatalf("xray did not listen: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An application asks the hijacked DNS for a name the rules send through
// a proxy and gets a fake address; its TCP connection and its UDP
// datagrams to that address reach the proxy (a real Xray server) as that
// name, and the UDP replies come back from the fake address it sent to.
func TestFakeIPThroughXray(t *testing.T) {
	l := newLab(t)
	l.webServer(t, l.web+":8080")
	l.udpEcho(t, l.web+":7001")
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	access := l.xraySOCKS(t, "web.test", l.web)
	conf := l.config("") + fmt.Sprintf(`
[dns.fakeip]
ipv4 = "198.18.0.0/15"

[[outbounds]]
tag = "xray"
type = "socks"
server = "%s:1080"

[[rules]]
domain = ["web.test"]
outbound = "xray"
`, l.web)
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), conf)

	err := in(l.client, func() error {
		m := new(dns.Msg)
		m.SetQuestion("web.test.", dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, "192.0.2.53:53")
		if err != nil || len(r.Answer) != 1 {
			return fmt.Errorf("dns: %v, %v", r, err)
		}
		fake, _ := netip.AddrFromSlice(r.Answer[0].(*dns.A).A.To4())
		if !netip.MustParsePrefix("198.18.0.0/15").Contains(fake) {
			return fmt.Errorf("web.test resolved to %s, not a fake address", fake)
		}

		// The request is written on this goroutine's own connection: a
		// transport would dial on goroutines outside the namespace.
		conn, err := net.DialTimeout("tcp", fake.String()+":8080", 5*time.Second)
		if err != nil {
			return fmt.Errorf("tcp to the fake address: %w", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest("GET", "http://"+fake.String()+":8080/", nil)
		req.Close = true
		if err := req.Write(conn); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			return fmt.Errorf("http to the fake address: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != l.web+":8080" {
			return fmt.Errorf("http %s body %q", resp.Status, body)
		}

		c, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer c.Close()
		to := &net.UDPAddr{IP: fake.AsSlice(), Port: 7001}
		for try := 0; ; try++ {
			c.WriteTo([]byte("via xray"), to)
			c.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 512)
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				if try < 5 {
					continue
				}
				return fmt.Errorf("udp through xray: %w", err)
			}
			if from.String() != to.String() || string(buf[:n]) != l.web+":7001 via xray" {
				return fmt.Errorf("udp reply %q from %s, sent to %s", buf[:n], from, to)
			}
			return nil
		}
	})
	log, _ := os.ReadFile(access)
	if err != nil {
		t.Fatalf("%v\n%s\nxray's access log:\n%s", err, sw.Logs, log)
	}
	if !strings.Contains(string(log), "tcp:web.test:8080") || !strings.Contains(string(log), "udp:web.test:7001") {
		t.Fatalf("xray's access log has no web.test flows:\n%s", log)
	}
}
