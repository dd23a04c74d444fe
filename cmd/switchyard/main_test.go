package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// runMainEnv makes the test binary run main instead of the tests, so a test
// can run the command as a user would and read its output and exit code.
const runMainEnv = "SWITCHYARD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"switchyard"}, strings.Split(os.Getenv(runMainEnv+"_ARGS"), "\n")...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// switchyard runs the command with args and returns its standard error and
// exit code.
func switchyard(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1", runMainEnv+"_ARGS="+strings.Join(args, "\n"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return stderr.String(), cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("switchyard %v did not exit; stderr:\n%s", args, stderr.String())
	}
	return "", 0
}

// A configuration that loads but cannot be built is refused on the run path
// with "configuration invalid: " and the build error, and a non-zero exit.
func TestRunRefusesAConfigurationThatFailsToBuild(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "up"
type = "socks"
server = "127.0.0.1:1"
tls = { ca_file = %q }

[route]
final = "up"
`, ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := switchyard(t, "run", "-c", cfg)
	if code == 0 {
		t.Fatalf("exit code 0; stderr:\n%s", stderr)
	}
	const want = "configuration invalid: building outbound up@v1 failed: no certificate in CA PEM bundle"
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if !slices.Contains(lines, want) {
		t.Fatalf("stderr has no line %q:\n%s", want, stderr)
	}
}

// check prints a warning per key that has no effect, with its file and
// line, and still passes the configuration.
func TestCheckPrintsWarnings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(`[[groups]]
tag = "proxy"
policy = "selector"
members = ["direct"]
check_url = "https://probe.example/"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := switchyard(t, "check", "-c", cfg)
	want := "warning: " + cfg + ":5: groups[0].check_url: a selector group does not probe its members: check_url is ignored"
	if code != 0 || strings.TrimSpace(stderr) != want {
		t.Fatalf("exit code %d; stderr:\n%s\nwant:\n%s", code, stderr, want)
	}
}
