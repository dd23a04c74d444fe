package swproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a stand-in for the binary: it logs a ready line naming two
// inbounds, then waits for SIGTERM and exits cleanly.
func fake(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sh")
	script := "#!/bin/sh\ntrap 'echo stopping >&2; exit 0' TERM\necho 'level=INFO msg=\"switchyard ready\" socks-in=127.0.0.1:1080 mixed-in=\"127.0.0.1:7890\"' >&2\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartCmd reads the bound addresses from the ready line, the log keeps
// what the process wrote, and Stop ends it cleanly and waits for the
// reader: no goroutine is left behind.
func TestStartReadsTheReadyLineAndStops(t *testing.T) {
	p := StartCmd(t, exec.Command(fake(t)))
	if got := p.Addr("socks-in"); got != "127.0.0.1:1080" {
		t.Fatalf("socks-in %q", got)
	}
	if got := p.Addr("mixed-in"); got != "127.0.0.1:7890" {
		t.Fatalf("mixed-in %q", got)
	}
	p.Stop()
	if p.Cmd.ProcessState == nil || !p.Cmd.ProcessState.Success() {
		t.Fatalf("exit: %v", p.Cmd.ProcessState)
	}
	p.WaitLog("stopping", 1, time.Second)
	p.Stop() // a second Stop leaves the exited process alone
}
