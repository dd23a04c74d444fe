package interop

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/store"
	"switchyard/test/socksclient"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// switchyardBinary builds the real binary once for the tests that run it.
func switchyardBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-interop-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "switchyard")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "switchyard/cmd/switchyard").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building switchyard: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runBinary runs `switchyard run -c` on cfg and waits until its SOCKS5
// inbound on port accepts.
func runBinary(t *testing.T, cfg string, port int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(switchyardBinary(t), "run", "-c", path)
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
			t.Logf("switchyard logs:\n%s", logs)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			t.Fatalf("switchyard exited:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("switchyard not listening on %d:\n%s", port, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servedBy opens one flow to echo through proxy and returns which peer's
// log shows it (the peer that accepted a connection to echo), or the
// flow's error.
func servedBy(t *testing.T, proxy, echo string, ps map[string]*peerProc) (string, error) {
	t.Helper()
	before := map[string]int{}
	for tag, p := range ps {
		before[tag] = strings.Count(p.logs.String(), "accepted tcp:"+echo)
	}
	c, err := socksclient.DialWithin(proxy, echo, "", "", 10*time.Second)
	if err != nil {
		return "", err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write([]byte("ping"))
	if err == nil {
		_, err = c.Read(make([]byte, 4))
	}
	c.Close()
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		for tag, p := range ps {
			if strings.Count(p.logs.String(), "accepted tcp:"+echo) > before[tag] {
				return tag, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no peer logged the flow")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The same as TestURLTestLeavesAKilledNodeAndDoesNotFlapBack, with the real
// binary: the killed pick's traffic moves to the other node after at most
// two failed flows, without waiting for a probe cycle, and does not move
// back once the node returns and is probed alive again.
func TestTheBinaryLeavesAKilledNodeAndDoesNotFlapBack(t *testing.T) {
	portA, portB, portIn := freePort(t), freePort(t), freePort(t)
	ps := map[string]*peerProc{
		"a": startKillablePeer(t, "xray", xraySocks(portA), portA),
		"b": startKillablePeer(t, "xray", xraySocks(portB), portB),
	}
	runBinary(t, `
[log]
level = "debug"

[state]
path = ""
`+twoNodes(fmt.Sprintf("127.0.0.1:%d", portIn), probeServer(t), "check_interval = \"2s\"\ncheck_timeout = \"1s\"", portA, portB,
		"auto", "urltest", `tolerance = "500ms"`), portIn)
	proxy := fmt.Sprintf("127.0.0.1:%d", portIn)
	echo := tcpEcho(t)
	time.Sleep(3 * time.Second) // a probe cycle measures both
	pick, err := servedBy(t, proxy, echo, ps)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := servedBy(t, proxy, echo, ps); err != nil || got != pick {
			t.Fatalf("the pick moved from %s to %q (%v) with both alive", pick, got, err)
		}
	}
	other := map[string]string{"a": "b", "b": "a"}[pick]
	ps[pick].kill()
	failed := 0
	for i := range 10 {
		got, err := servedBy(t, proxy, echo, map[string]*peerProc{other: ps[other]})
		switch {
		case err != nil:
			failed++
			if failed > 2 {
				t.Fatalf("flow %d after the kill failed (%d failed): %v", i, failed, err)
			}
		case got != other:
			t.Fatalf("flow %d after the kill via %s", i, got)
		}
	}
	t.Logf("%d failed flows after the kill", failed)
	ps[pick].start()
	time.Sleep(5 * time.Second) // probed alive again
	for i := range 10 {
		if got, err := servedBy(t, proxy, echo, ps); err != nil || got != other {
			t.Fatalf("flow %d after %s came back: via %q (%v), want %s kept", i, pick, got, err, other)
		}
	}
}

// A selector choice kept in the state file is in force when the binary
// starts: flows go to the chosen member, not the first.
func TestTheBinaryStartsWithThePersistedSelectorChoice(t *testing.T) {
	portA, portB, portIn := freePort(t), freePort(t), freePort(t)
	ps := map[string]*peerProc{
		"a": startKillablePeer(t, "xray", xraySocks(portA), portA),
		"b": startKillablePeer(t, "xray", xraySocks(portB), portB),
	}
	statePath := filepath.Join(t.TempDir(), "state.db")
	st := store.Open(statePath, slog.New(slog.DiscardHandler))
	st.SetSelectorChoice("pick", "tcp", "b")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	runBinary(t, fmt.Sprintf("[state]\npath = %q\n", statePath)+
		twoNodes(fmt.Sprintf("127.0.0.1:%d", portIn), probeServer(t), "", portA, portB, "pick", "selector", ""), portIn)
	proxy := fmt.Sprintf("127.0.0.1:%d", portIn)
	echo := tcpEcho(t)
	for range 3 {
		if got, err := servedBy(t, proxy, echo, ps); err != nil || got != "b" {
			t.Fatalf("via %q (%v), want the persisted choice b", got, err)
		}
	}
}
