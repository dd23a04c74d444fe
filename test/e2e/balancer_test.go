package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

func TestTrafficMovesOffAMemberThatStopsAnswering(t *testing.T) {
	echo := echoServer(t)
	// The second instance is a working SOCKS5 proxy.
	b := start(t, `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
`)
	// The first member accepts TCP but is no proxy: it probes healthy while
	// flows through it fail.
	fake := listenTCP(t)
	go func() {
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	a := start(t, fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "m1"
type = "socks"
server = %q

[[outbounds]]
tag = "m2"
type = "socks"
server = %q

[[balancers]]
tag = "pool"
members = ["m1", "m2"]
strategy = "failover"
probe_interval = "1s"
probe_timeout = "500ms"

[route]
final = "pool"
`, fake.Addr().String(), b.addr("socks-in")))
	if c, err := socksclient.Dial(a.addr("socks-in"), echo, "", ""); err == nil {
		c.Close()
		t.Fatal("a flow through the broken first member worked")
	}
	fake.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := socksclient.Dial(a.addr("socks-in"), echo, "", "")
		if err == nil {
			roundTrip(t, c, 64*1024)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flows did not move off the member that stopped accepting: %v\n%s", err, a.logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.waitLog("balancer member m1 is now down", 1, time.Second)
}

func TestAMemberWithNoUpstreamIsRefusedByCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pool.toml")
	os.WriteFile(path, []byte(`
[[balancers]]
tag = "pool"
members = ["direct"]
`), 0o600)
	out, err := exec.Command(bin, "check", "-c", path).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("check exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ":4: balancers[0].members[0]: balancer pool: outbound direct has no upstream a TCP health probe can reach") {
		t.Fatalf("check output:\n%s", out)
	}
}

func TestARefusedReloadKeepsTheOldConfig(t *testing.T) {
	echo := echoServer(t)
	p := start(t, twoInbounds)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o600)
	p.rewrite(twoInbounds + fmt.Sprintf(`
[[outbounds]]
tag = "up"
type = "socks"
server = "127.0.0.1:1"
tls = { ca_file = %q }

[route]
final = "up"
`, empty))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog("building outbound up@v1 failed: no certificate in CA PEM bundle", 1, 10*time.Second)
	if strings.Contains(p.logs.String(), "reload applied") {
		t.Fatal("a refused reload was applied")
	}
	c, err := socksclient.Dial(p.addr("socks-in"), echo, "", "")
	if err != nil {
		t.Fatalf("the old configuration stopped serving: %v", err)
	}
	roundTrip(t, c, 4096)
}
