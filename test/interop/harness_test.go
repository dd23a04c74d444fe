// Package interop runs switchyard's proxy clients against real third-party
// servers (Xray, sing-box) on loopback. The peers are built by
// scripts/peers.sh at pinned versions; a missing peer fails the suite.
package interop

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/test/internal/swproc"
	"switchyard/test/socksclient"
)

var peers = map[string]string{} // name -> binary

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, name := range []string{"xray", "sing-box"} {
		out, err := exec.Command(filepath.Join(root, "scripts", "peers.sh"), "path", name).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "interop: locating %s: %v\n", name, err)
			os.Exit(1)
		}
		bin := strings.TrimSpace(string(out))
		if _, err := os.Stat(bin); err != nil {
			fmt.Fprintf(os.Stderr, "interop: peer %s is not installed (%v); run scripts/peers.sh install (the README's test command does)\n", name, err)
			os.Exit(1)
		}
		peers[name] = bin
	}
	os.Exit(m.Run())
}

// freePort returns a loopback port nothing listens on (TCP and UDP),
// below the ephemeral range (swproc.FreePort).
func freePort(t *testing.T) int { return swproc.FreePort(t) }

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startPeer runs a peer ("xray" or "sing-box") with a JSON config and waits
// until it accepts TCP on port (or, for UDP-only servers, until it has run
// for a moment).
func startPeer(t *testing.T, name, configJSON string, tcpPort int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(configJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(peers[name], "run", "-c", path)
	logs := &logBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", name, logs)
		default:
		}
		if tcpPort == 0 {
			time.Sleep(500 * time.Millisecond)
			return
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort), 200*time.Millisecond)
		if err == nil {
			c.Close()
			// Something answers on the port; make sure it is the peer,
			// not another process that holds the port while the peer
			// failed to bind it.
			select {
			case <-done:
				t.Fatalf("%s exited:\n%s", name, logs)
			case <-time.After(100 * time.Millisecond):
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %d after 15s:\n%s", name, tcpPort, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSwitchyard runs switchyard in-process with a SOCKS5 inbound and the
// given outbound tables (TOML), routing everything to final. It returns the
// SOCKS5 address.
func startSwitchyard(t *testing.T, outbounds, final string) string {
	t.Helper()
	cfg := fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

%s

[route]
final = %q
`, outbounds, final)
	_, addr := runConfig(t, cfg)
	return addr
}

// tcpEcho is a loopback TCP echo server.
func tcpEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// udpEcho answers every datagram with prefix+payload from its own address.
func udpEcho(t *testing.T, prefix string) string {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(prefix), b[:n]...), from)
		}
	}()
	return c.LocalAddr().String()
}

// checkTCP sends 1 MiB of random bytes through the SOCKS5 proxy to an echo
// server and requires them back byte for byte.
func checkTCP(t *testing.T, proxy string) {
	t.Helper()
	checkTCPTo(t, proxy, tcpEcho(t))
}

// checkTCPTo is checkTCP toward a given echo server.
func checkTCPTo(t *testing.T, proxy, echo string) {
	t.Helper()
	c, err := socksclient.Dial(proxy, echo, "", "")
	if err != nil {
		t.Fatalf("CONNECT %s through switchyard: %v", echo, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		errc <- err
	}()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("1 MiB echo differs")
	}
}

// checkUDPTo is checkUDP toward given echo servers, the i-th answering
// "p<i>:" + payload.
// udpSizes are the datagram sizes every UDP check sends.
var udpSizes = []int{1, 2, 100, 512, 1000, 1400}

func checkUDPTo(t *testing.T, proxy string, targets []string) {
	t.Helper()
	checkUDPSizes(t, proxy, targets, udpSizes)
}

// checkUDPSizes is checkUDPTo with datagrams of the given sizes.
func checkUDPSizes(t *testing.T, proxy string, targets []string, sizes []int) {
	t.Helper()
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatalf("UDP ASSOCIATE through switchyard: %v", err)
	}
	defer a.Close()
	for _, size := range sizes {
		for i, to := range targets {
			payload := make([]byte, size)
			rand.Read(payload)
			want := append([]byte(fmt.Sprintf("p%d:", i)), payload...)
			var from string
			var got []byte
			ok := false
			for try := 0; try < 3 && !ok; try++ { // UDP: allow a lost first packet while a sub-link opens
				a.Send(to, payload)
				from, got, ok = a.Recv(2 * time.Second)
			}
			if !ok {
				t.Fatalf("no UDP reply of %d bytes from %s", size, to)
			}
			if from != to || !bytes.Equal(got, want) {
				t.Fatalf("UDP reply of %d bytes from %s (want %s), payload equal: %v", len(got), from, to, bytes.Equal(got, want))
			}
		}
	}
}

// checkUDP sends datagrams of 1..1400 bytes to each peer through one SOCKS5
// association and requires each reply, attributed to the peer it came from.
// With one peer it checks a single-target protocol; with two, per-packet
// addressing.
func checkUDP(t *testing.T, proxy string, npeers int) {
	t.Helper()
	checkUDPTo(t, proxy, udpEchoes(t, npeers))
}

// udpEchoes starts n UDP echo servers on loopback; the i-th prefixes its
// replies with "p<i>:", as the checks expect.
func udpEchoes(t *testing.T, n int) []string {
	t.Helper()
	var targets []string
	for i := range n {
		targets = append(targets, udpEcho(t, fmt.Sprintf("p%d:", i)))
	}
	return targets
}
