package e2e

import (
	"strings"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// The runtime stats line (SIGUSR1) counts the live sessions of
// authenticated connections.
func TestStatsCountSessions(t *testing.T) {
	p := start(t, `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
users = [{ username = "u", password = "p", up_mbps = 5 }]
`)
	echo := echoServer(t)
	var open []interface{ Close() error }
	for range 2 {
		c, err := socksclient.Dial(p.addr("socks-in"), echo, "u", "p")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	p.stats()
	if got := field(lastStats(p), "sessions"); got != "2" {
		t.Fatalf("sessions=%q with two authenticated connections, want 2", got)
	}
	for _, c := range open {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p.stats()
		if field(lastStats(p), "sessions") == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions still counted after their connections closed: %s", lastStats(p))
		}
	}
}

// lastStats returns the latest runtime stats line.
func lastStats(p *proc) string {
	lines := strings.Split(p.logs.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "runtime stats") {
			return lines[i]
		}
	}
	return ""
}
