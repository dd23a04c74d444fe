package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainBinary builds switchyard without the race detector, whose shadow
// memory would swamp what a memory test measures.
func plainBinary(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		plainBin = filepath.Join(filepath.Dir(bin), "switchyard-plain")
		out, err := exec.Command("go", "build", "-o", plainBin, "switchyard/cmd/switchyard").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("building switchyard: %v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}

// procStatus reads a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			var kib int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib)
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// Hundreds of connections each sending an endless request head hold no
// more than the bound on handshakes times what one may hold (a 64 KiB head
// and its buffers), and the memory comes back once they are gone.
func TestMemoryBeforeAuthenticationIsBoundedAndReturns(t *testing.T) {
	const (
		attackers     = 400
		maxHandshakes = 256
		perConn       = 1 << 20 // what each attacker tries to send
	)
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	config := fmt.Sprintf(`
[log]
level = "info"
[[inbounds]]
tag = "mixed-in"
type = "mixed"
listen = "127.0.0.1:0"
handshake_timeout = "60s"
max_handshakes = %d
`, maxHandshakes)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCmd(t, exec.Command(plainBinary(t), "run", "-c", path))
	pid := p.cmd.Process.Pid
	proxy := p.addr("mixed-in")
	time.Sleep(500 * time.Millisecond)
	base := procStatus(t, pid, "VmRSS")

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	filler := []byte(strings.Repeat("a", 16<<10))
	for range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, "GET http://x/ HTTP/1.1\r\nX: "); err != nil {
				return
			}
			for sent := 0; sent < perConn; sent += len(filler) {
				if _, err := c.Write(filler); err != nil {
					return // refused (431) or closed at the bound
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // what the sockets buffered is read meanwhile
	peak := procStatus(t, pid, "VmHWM")
	// What one connection in its handshake may hold: its 64 KiB head, and
	// its reader, writer and goroutine; the garbage collector may let the
	// heap reach twice what is live.
	const perHandshakeKiB = 2 * (64 + 16)
	bound := base + maxHandshakes*perHandshakeKiB + 8<<10
	t.Logf("RSS: %d KiB before, peak %d KiB (bound %d KiB) with %d attackers", base, peak, bound, attackers)
	if peak > bound {
		t.Fatalf("peak RSS %d KiB, above the bound %d KiB (base %d KiB + %d handshakes × %d KiB + 8 MiB)", peak, bound, base, maxHandshakes, perHandshakeKiB)
	}

	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	var now int64
	for range 150 {
		time.Sleep(100 * time.Millisecond)
		if now = procStatus(t, pid, "VmRSS"); now <= base+6<<10 {
			t.Logf("RSS back to %d KiB", now)
			return
		}
	}
	t.Fatalf("RSS %d KiB 15 s after the attackers left, base %d KiB", now, base)
}
