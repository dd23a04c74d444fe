// Package swproc runs the real switchyard binary for the end-to-end, the
// dashboard and the latency tests: it builds the binary with the race
// detector, starts it on a configuration, reads the bound addresses from
// its ready line, keeps its log, and stops it requiring a clean exit.
package swproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ReadyTimeout bounds the wait for the ready line; StopTimeout the wait
// for the exit after SIGTERM.
const (
	ReadyTimeout = 20 * time.Second
	StopTimeout  = 5 * time.Second
)

// Build compiles switchyard with the race detector into a new temporary
// folder named after prefix and returns the binary's path and the folder
// (the caller removes it).
func Build(prefix string) (bin, dir string, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "switchyard")
	build := exec.Command("go", "build", "-race", "-o", bin, "switchyard/cmd/switchyard")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("building switchyard: %w", err)
	}
	return bin, dir, nil
}

// LogBuf is a process's log, written by its reader and read by the test.
type LogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *LogBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Proc is one running switchyard.
type Proc struct {
	T     testing.TB
	Cmd   *exec.Cmd
	Logs  *LogBuf
	Addrs map[string]string // inbound tag -> bound address, from the ready line
	Done  chan error        // the process's exit, once
}

var readyAttr = regexp.MustCompile(`([\w.-]+)=(\S+)`)

// Start writes config to a file and runs `bin run -c` on it, as StartCmd.
func Start(t testing.TB, bin, config string) *Proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartCmd(t, exec.Command(bin, "run", "-c", path))
}

// StartCmd runs cmd, a command that runs switchyard, and waits
// (ReadyTimeout at most) for its ready line, whose fields give the bound
// addresses. The process is stopped with Stop at the test's end.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{T: t, Cmd: cmd, Logs: &LogBuf{}, Addrs: map[string]string{}, Done: make(chan error, 1)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.Logs.Write([]byte(line + "\n"))
			if strings.Contains(line, "switchyard ready") {
				select {
				case ready <- line:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.Done <- cmd.Wait()
	}()
	select {
	case line := <-ready:
		rest := line[strings.Index(line, "switchyard ready"):]
		for _, m := range readyAttr.FindAllStringSubmatch(rest, -1) {
			p.Addrs[m[1]] = strings.Trim(m[2], `"`)
		}
	case err := <-p.Done:
		t.Fatalf("switchyard exited before ready (%v):\n%s", err, p.Logs)
	case <-time.After(ReadyTimeout):
		cmd.Process.Kill()
		<-p.Done
		t.Fatalf("switchyard not ready after %v:\n%s", ReadyTimeout, p.Logs)
	}
	t.Cleanup(p.Stop)
	return p
}

// Addr is the bound address of the inbound tag; the test fails without one.
func (p *Proc) Addr(tag string) string {
	a, ok := p.Addrs[tag]
	if !ok {
		p.T.Fatalf("no inbound %q in the ready line (%v)", tag, p.Addrs)
	}
	return a
}

// Stop sends SIGTERM and requires a clean exit within StopTimeout and no
// race report in the log; a process that exited already is left as it is.
func (p *Proc) Stop() {
	if p.Cmd.ProcessState != nil {
		return
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.Done:
		if err != nil {
			p.T.Errorf("switchyard exited with %v:\n%s", err, p.Logs)
		}
	case <-time.After(StopTimeout):
		p.Cmd.Process.Kill()
		<-p.Done
		p.T.Errorf("switchyard did not exit within %v of SIGTERM:\n%s", StopTimeout, p.Logs)
	}
	if strings.Contains(p.Logs.String(), "DATA RACE") {
		p.T.Errorf("race detected:\n%s", p.Logs)
	}
}

// Signal sends sig and waits (10 s at most) for the exit it asks for,
// returning how long it took.
func (p *Proc) Signal(sig os.Signal) (time.Duration, error) {
	start := time.Now()
	p.Cmd.Process.Signal(sig)
	select {
	case err := <-p.Done:
		return time.Since(start), err
	case <-time.After(10 * time.Second):
		p.Cmd.Process.Kill()
		return time.Since(start), fmt.Errorf("no exit after 10s")
	}
}

// WaitLog waits (d at most) until the log holds n lines containing s.
func (p *Proc) WaitLog(s string, n int, d time.Duration) {
	p.T.Helper()
	deadline := time.Now().Add(d)
	for strings.Count(p.Logs.String(), s) < n {
		if time.Now().After(deadline) {
			p.T.Fatalf("no %d× %q in the log after %v:\n%s", n, s, d, p.Logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
