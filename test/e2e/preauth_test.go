package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// greeted opens a connection to a SOCKS5 inbound and sends the greeting.
// It returns the connection once the method choice came back, or nil with
// how long the proxy took to close it instead.
func greeted(t *testing.T, proxy string) (net.Conn, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 0})
	var choice [2]byte
	_, err = io.ReadFull(c, choice[:])
	c.SetDeadline(time.Time{})
	switch {
	case err == nil:
		return c, 0
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.Close()
		t.Fatalf("a client got no answer nor a close within 10s")
	}
	c.Close()
	return nil, time.Since(start)
}

// At the descriptor limit a new client is closed at once instead of waiting
// for ever for its SOCKS5 reply; the log names the limit and the open flows;
// once descriptors free up, clients are served again.
func TestClientsPastTheDescriptorLimitAreClosedAtOnce(t *testing.T) {
	const limit = 64
	echo := echoServer(t)
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	config := `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
handshake_timeout = "60s"
max_handshakes = 1000
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// ulimit -n sets the hard limit too: the process cannot raise it.
	p := startCmd(t, exec.Command("bash", "-c", `ulimit -n `+strconv.Itoa(limit)+` && exec "$0" "$@"`, bin, "run", "-c", path))
	proxy := p.addr("socks-in")

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var closedIn []time.Duration
	for len(closedIn) < 5 {
		if len(held) > limit {
			t.Fatalf("%d clients served under a limit of %d descriptors", len(held), limit)
		}
		c, d := greeted(t, proxy)
		if c != nil {
			held = append(held, c)
			continue
		}
		closedIn = append(closedIn, d)
	}
	for _, d := range closedIn {
		if d > 2*time.Second {
			t.Fatalf("clients past the limit were closed after %v, not at once", closedIn)
		}
	}
	p.waitLog("out of file descriptors: new connections are closed at once", 1, 5*time.Second)
	line := lastLine(p, "out of file descriptors")
	if field(line, "descriptor_limit") != strconv.Itoa(limit) || field(line, "open_flows") == "" {
		t.Fatalf("log line %q; want the limit and the open flows", line)
	}

	// Descriptors free up: a new client is served, to its destination.
	for _, c := range held[:len(held)/2] {
		c.Close()
	}
	held = held[len(held)/2:]
	var up net.Conn
	waitFor(t, 5*time.Second, func() bool {
		var err error
		up, err = socksclient.DialWithin(proxy, echo, "", "", 2*time.Second)
		return err == nil
	})
	defer up.Close()
	up.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := up.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(up, got); err != nil || string(got) != "back" {
		t.Fatalf("echo %q, %v after recovery", got, err)
	}
}

func lastLine(p *proc, s string) string {
	lines := strings.Split(p.logs.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return ""
}

// Dials in progress show in the SIGUSR1 stats: 20 clients whose dials hang
// on a silent server are 20 dials in progress, not 0 flows and nothing.
func TestStuckDialsShowInTheStats(t *testing.T) {
	t.Parallel()
	tcp := newSilentTCP(t)
	p := start(t, `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[outbounds]]
tag = "up"
type = "socks"
server = "`+tcp.addr()+`"
[route]
final = "up"
`)
	const clients = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var cs []net.Conn
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", p.addr("socks-in"))
			if err != nil {
				t.Error(err)
				return
			}
			c.Write([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
			mu.Lock()
			cs = append(cs, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	waitFor(t, 5*time.Second, func() bool {
		tcp.mu.Lock()
		defer tcp.mu.Unlock()
		return len(tcp.conns) >= clients
	})
	p.stats()
	line := lastLine(p, "runtime stats")
	if got, want := field(line, "dials_in_progress"), fmt.Sprint(clients); got != want || field(line, "flows") != "0" {
		t.Fatalf("stats %q; want dials_in_progress=%s flows=0", line, want)
	}
}

// On a mixed port one handshake_timeout covers the first byte and the
// protocol's handshake: 4 bytes hold a connection for it, not twice it.
// Past max_handshakes new connections are closed at once, and the log
// counts them.
func TestMixedPortHandshakeLimits(t *testing.T) {
	t.Parallel()
	p := start(t, `
[[inbounds]]
tag = "mixed-in"
type = "mixed"
listen = "127.0.0.1:0"
handshake_timeout = "2s"
max_handshakes = 4
`)
	proxy := p.addr("mixed-in")
	closed := func(b string) time.Duration {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.Write([]byte(b))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("not closed within 10s")
		}
		return time.Since(start)
	}
	if d := closed("GET "); d < 1500*time.Millisecond || d > 3500*time.Millisecond {
		t.Fatalf("4 bytes held the connection %v; want about the 2s handshake_timeout", d)
	}

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, _ := greeted(t, proxy) // in its handshake until it sends a request
		if c == nil {
			t.Fatal("a connection within max_handshakes was closed")
		}
		held = append(held, c)
	}
	for range 3 {
		if d := closed("GET "); d > time.Second {
			t.Fatalf("a connection past max_handshakes was closed after %v, not at once", d)
		}
	}
	p.waitLog("too many connections in their handshake", 1, 5*time.Second)
	if line := lastLine(p, "too many connections in their handshake"); field(line, "limit") != "4" || field(line, "inbound") != "mixed-in" {
		t.Fatalf("log line %q", line)
	}
}
