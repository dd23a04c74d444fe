package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// POST /restart (metacubexd's "Restart Core") answers {"status":"ok"},
// stops the process as SIGTERM does (its flows end) and executes the
// binary again in the same process, with the same arguments and
// environment: a second "switchyard ready" on the same stderr, the API
// answering again, the selector choice made before it still in force
// (the store was flushed and read back).
func TestRestartReexecutesTheProcess(t *testing.T) {
	apiPort, socksPort := freeLoopbackPort(t), freeLoopbackPort(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "switchyard.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[state]
path = %q

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:%d"

[[outbounds]]
tag = "d1"
type = "direct"

[[outbounds]]
tag = "d2"
type = "direct"

[[groups]]
tag = "pick"
policy = "selector"
members = ["d1", "d2"]

[route]
final = "pick"
`, apiPort, filepath.Join(dir, "state.db"), socksPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	echo := echoServer(t)

	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Env = append(os.Environ(), "SWITCHYARD_RESTART_TEST=kept")
	p := startCmd(t, cmd)
	waitAPI(t, base)
	mustCall(t, http.MethodPut, base+"/proxies/pick", `{"name":"d2"}`)
	old := echoFlow(t, p.addr("socks-in"), echo)
	defer old.Close()

	code, body := apiCall(t, http.MethodPost, base+"/restart", "")
	var answer struct {
		Status string `json:"status"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &answer) != nil || answer.Status != "ok" {
		t.Fatalf("POST /restart: %d %s", code, body)
	}
	p.waitLog("switchyard ready", 2, 20*time.Second)
	select {
	case err := <-p.done:
		t.Fatalf("the process exited (%v) instead of restarting in place:\n%s", err, p.logs)
	default:
	}
	for _, want := range []string{"restart requested", "restarting: stopping first", "restarting executable="} {
		if !strings.Contains(p.logs.String(), want) {
			t.Fatalf("no %q in the log:\n%s", want, p.logs)
		}
	}
	// The new image runs under the same pid with the same arguments and
	// environment.
	pid := p.cmd.Process.Pid
	args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00"); !slices.Equal(got, cmd.Args) {
		t.Fatalf("arguments after the restart: %q, want %q", got, cmd.Args)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(env, []byte("\x00SWITCHYARD_RESTART_TEST=kept\x00")) && !bytes.HasPrefix(env, []byte("SWITCHYARD_RESTART_TEST=kept\x00")) {
		t.Fatal("the environment was not kept across the restart")
	}

	// The flow open before the restart was ended by its stop.
	old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := old.Read(make([]byte, 1)); err == nil {
		t.Fatal("a flow from before the restart still carries data")
	}
	waitAPI(t, base)
	var pick struct {
		Now string `json:"now"`
	}
	code, body = apiCall(t, http.MethodGet, base+"/proxies/pick", "")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &pick) != nil || pick.Now != "d2" {
		t.Fatalf("GET /proxies/pick after the restart: %d %s, want now d2 as chosen before it", code, body)
	}
	c := echoFlow(t, p.addr("socks-in"), echo)
	defer c.Close()
	if got := onlyChain(t, base); !slices.Equal(got, []string{"d2", "pick"}) {
		t.Fatalf("a flow after the restart: chain %v, want d2 via pick", got)
	}
}

// echoFlow opens a SOCKS flow through proxy to the echo server and checks
// that it carries data.
func echoFlow(t *testing.T, proxy, echo string) net.Conn {
	t.Helper()
	c, err := socksclient.DialWithin(proxy, echo, "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	b := make([]byte, 4)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo through %s: %q %v", proxy, b, err)
	}
	return c
}

// restartConfig is an API and a SOCKS inbound going direct.
func restartConfig(t *testing.T, apiPort int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
`, apiPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ownBinary is a copy of the switchyard binary that the test may remove
// or replace.
func ownBinary(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "switchyard")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A restart whose binary is gone is refused before anything stops: a 500
// naming it, and the process keeps serving.
func TestRestartRefusedWithoutItsBinary(t *testing.T) {
	apiPort := freeLoopbackPort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	exe := ownBinary(t)
	p := startCmd(t, exec.Command(exe, "run", "-c", restartConfig(t, apiPort)))
	waitAPI(t, base)
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	code, body := apiCall(t, http.MethodPost, base+"/restart", "")
	if code != http.StatusInternalServerError || !strings.Contains(body, exe) {
		t.Fatalf("POST /restart with the binary removed: %d %s", code, body)
	}
	waitAPI(t, base)
	echoFlow(t, p.addr("socks-in"), echoServer(t)).Close()
	if strings.Contains(p.logs.String(), "stopping") {
		t.Fatalf("the process stopped for a refused restart:\n%s", p.logs)
	}
}

// When the exec itself fails (the binary was replaced by a file that is
// executable but no program), the process, stopped already, says so and
// exits non-zero.
func TestRestartExitsWhenTheExecFails(t *testing.T) {
	apiPort := freeLoopbackPort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	exe := ownBinary(t)
	p := startCmd(t, exec.Command(exe, "run", "-c", restartConfig(t, apiPort)))
	waitAPI(t, base)
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, body := apiCall(t, http.MethodPost, base+"/restart", ""); code != http.StatusOK {
		t.Fatalf("POST /restart: %d %s", code, body)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("after a failed exec: %v, want exit status 1:\n%s", err, p.logs)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the process did not exit after its exec failed:\n%s", p.logs)
	}
	if !strings.Contains(p.logs.String(), "restart failed: the process has stopped") {
		t.Fatalf("no word of the failed exec in the log:\n%s", p.logs)
	}
}
