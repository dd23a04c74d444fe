package store

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuf collects a store's log lines; the writer goroutine logs too.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) lines(level string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, "level="+level) {
			out = append(out, l)
		}
	}
	return out
}

func newLog() (*slog.Logger, *logBuf) {
	b := &logBuf{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func closeStore(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func wantChoice(t *testing.T, s *Store, group, network, member string) {
	t.Helper()
	got, ok := s.SelectorChoice(group, network)
	if !ok || got != member {
		t.Fatalf("SelectorChoice(%q, %q) = %q, %v; want %q", group, network, got, ok, member)
	}
}

func wantDelay(t *testing.T, s *Store, node string, d Delay) {
	t.Helper()
	got, ok := s.LastDelay(node)
	if !ok || got.RTT != d.RTT || !got.At.Equal(d.At) {
		t.Fatalf("LastDelay(%q) = %+v, %v; want %+v", node, got, ok, d)
	}
}

func TestMemoryOnly(t *testing.T) {
	t.Chdir(t.TempDir())
	s := Open("", nil)
	if _, ok := s.SelectorChoice("proxy", "tcp"); ok {
		t.Fatal("an empty store has a choice")
	}
	if _, ok := s.LastDelay("hk"); ok {
		t.Fatal("an empty store has a delay")
	}
	at := time.Now()
	s.SetSelectorChoice("proxy", "tcp", "hk")
	s.SetSelectorChoice("proxy", "udp", "jp")
	s.SetSelectorChoice("proxy", "tcp", "sg") // the latest wins
	s.SetLastDelay("hk", Delay{RTT: 42 * time.Millisecond, At: at})
	wantChoice(t, s, "proxy", "tcp", "sg")
	wantChoice(t, s, "proxy", "udp", "jp")
	wantDelay(t, s, "hk", Delay{RTT: 42 * time.Millisecond, At: at})
	closeStore(t, s)
	closeStore(t, s) // idempotent
	wantChoice(t, s, "proxy", "tcp", "sg")
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Fatalf("a memory-only store wrote %v", entries)
	}
}

func TestPersistsAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	log, logs := newLog()
	at := time.Date(2026, 5, 1, 12, 30, 45, 123456789, time.UTC)
	s := Open(path, log)
	s.SetSelectorChoice("proxy", "tcp", "hk")
	s.SetSelectorChoice("proxy", "udp", "jp")
	s.SetSelectorChoice("auto", "tcp", "x")
	s.SetSelectorChoice("auto", "tcp", "sg") // the latest wins
	s.SetSelectorChoice("", "", "")          // empty names are names too
	s.SetLastDelay("hk", Delay{RTT: 42 * time.Millisecond, At: at})
	s.SetLastDelay("jp", Delay{RTT: time.Second, At: at.Add(-time.Hour)})
	s.SetLastDelay("jp", Delay{RTT: 7 * time.Millisecond, At: at.Add(time.Minute)})
	s.SetLastDelay("zero", Delay{})
	closeStore(t, s) // writes what is queued

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the state file has mode %v, want 0600", fi.Mode().Perm())
	}

	s = Open(path, log)
	defer closeStore(t, s)
	wantChoice(t, s, "proxy", "tcp", "hk")
	wantChoice(t, s, "proxy", "udp", "jp")
	wantChoice(t, s, "auto", "tcp", "sg")
	wantChoice(t, s, "", "", "")
	if _, ok := s.SelectorChoice("auto", "udp"); ok {
		t.Fatal("a choice that was never set came back")
	}
	wantDelay(t, s, "hk", Delay{RTT: 42 * time.Millisecond, At: at})
	wantDelay(t, s, "jp", Delay{RTT: 7 * time.Millisecond, At: at.Add(time.Minute)})
	wantDelay(t, s, "zero", Delay{})
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Fatalf("warnings: %q", w)
	}
}

// A file that is not a bbolt database is left as it is: one warn line
// names it and the reason, and the store works in memory.
func TestCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	garbage := bytes.Repeat([]byte("not a database\n"), 4096)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	s := Open(path, log)
	warns := logs.lines("WARN")
	if len(warns) != 1 || !strings.Contains(warns[0], "path="+path) || !strings.Contains(warns[0], "reason=") ||
		!strings.Contains(warns[0], "kept in memory") {
		t.Fatalf("want one warn line naming the path and the reason, got %q", warns)
	}
	if s.db != nil {
		t.Fatal("the store kept the corrupt file open")
	}
	s.SetSelectorChoice("proxy", "tcp", "hk")
	wantChoice(t, s, "proxy", "tcp", "hk")
	closeStore(t, s)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, garbage) {
		t.Fatalf("the corrupt file changed (err %v)", err)
	}
}

// A database whose pages are damaged past its meta pages fails the check
// (or the read) and is treated as corrupt, never written to.
func TestDamagedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := Open(path, nil)
	for i := range 200 {
		s.SetSelectorChoice("group-"+strconv.Itoa(i), "tcp", strings.Repeat("m", 100))
	}
	closeStore(t, s)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	if len(data) < 4*page {
		t.Fatalf("the file is only %d bytes", len(data))
	}
	for i := 2 * page; i < len(data); i++ {
		data[i] = 0xa5
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	s = Open(path, log)
	defer closeStore(t, s)
	if w := logs.lines("WARN"); len(w) != 1 || s.db != nil {
		t.Fatalf("a damaged file was used; warnings %q", w)
	}
	if _, ok := s.SelectorChoice("group-1", "tcp"); ok {
		t.Fatal("a value came back from a damaged file")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("the damaged file changed")
	}
}

// A file another store holds (bbolt locks it) is not waited for beyond the
// lock timeout: the second store runs in memory.
func TestLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	first := Open(path, nil)
	first.SetSelectorChoice("proxy", "tcp", "hk")

	log, logs := newLog()
	start := time.Now()
	second := open(path, log, options{lockTimeout: 50 * time.Millisecond, maxPending: maxPending})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open waited %v for the lock", d)
	}
	warns := logs.lines("WARN")
	if len(warns) != 1 || !strings.Contains(warns[0], "path="+path) || !strings.Contains(warns[0], `reason="another process holds it"`) {
		t.Fatalf("want one warn line naming the path and the lock, got %q", warns)
	}
	if second.db != nil {
		t.Fatal("the second store has the file")
	}
	second.SetSelectorChoice("proxy", "tcp", "jp")
	wantChoice(t, second, "proxy", "tcp", "jp")
	wantChoice(t, first, "proxy", "tcp", "hk")
	closeStore(t, second)
	closeStore(t, first)

	third := Open(path, nil)
	defer closeStore(t, third)
	wantChoice(t, third, "proxy", "tcp", "hk")
}

// An empty file holds nothing to lose: it is made a database (a crash
// while the file was first created can leave one).
func TestEmptyFileIsInitialized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	s := Open(path, log)
	s.SetSelectorChoice("proxy", "tcp", "hk")
	closeStore(t, s)
	s = Open(path, log)
	defer closeStore(t, s)
	wantChoice(t, s, "proxy", "tcp", "hk")
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Fatalf("warnings %q", w)
	}
}

func TestMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "folder", "switchyard.db")
	log, logs := newLog()
	s := Open(path, log)
	defer closeStore(t, s)
	if w := logs.lines("WARN"); len(w) != 1 || !strings.Contains(w[0], "path="+path) {
		t.Fatalf("warnings %q", w)
	}
	s.SetLastDelay("hk", Delay{RTT: time.Millisecond})
	wantDelay(t, s, "hk", Delay{RTT: time.Millisecond})
}

// stalled opens a store whose writes wait until release is called (and
// counts them), with a queue of maxPending keys.
func stalled(t *testing.T, path string, maxPending int) (s *Store, release func(), writes func() int) {
	t.Helper()
	gate := make(chan struct{})
	var mu sync.Mutex
	n := 0
	s = open(path, nil, options{lockTimeout: lockTimeout, maxPending: maxPending, beforeWrite: func() error {
		<-gate
		mu.Lock()
		n++
		mu.Unlock()
		return nil
	}})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the store's Close, which waits for the writer
	return s, release, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// However slow the file, a Set returns at once, the queue stays within its
// bound, and every latest value reaches the file.
func TestWritesNeverBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	const bound = 8
	s, release, writes := stalled(t, path, bound)
	s.SetSelectorChoice("first", "tcp", "m")
	waitFor(t, func() bool { // the writer holds the first value, stalled
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 0
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 3 {
			for i := range 10 * bound {
				name := "g" + strconv.Itoa(i)
				s.SetSelectorChoice(name, "tcp", "m"+strconv.Itoa(round))
				s.SetLastDelay(name, Delay{RTT: time.Duration(round) * time.Millisecond})
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Set blocked behind a stalled write")
	}
	s.mu.Lock()
	pending, resync := len(s.pending), s.resync
	s.mu.Unlock()
	if pending > bound || !resync {
		t.Fatalf("queue holds %d keys (bound %d), resync %v", pending, bound, resync)
	}
	wantChoice(t, s, "g3", "tcp", "m2") // reads see the latest value at once
	wantChoice(t, s, "first", "tcp", "m")

	release()
	closeStore(t, s)
	if n := writes(); n > 3 {
		t.Errorf("%d writes for one stalled round and the rest coalesced", n)
	}
	s = Open(path, nil)
	defer closeStore(t, s)
	for i := range 10 * bound {
		name := "g" + strconv.Itoa(i)
		wantChoice(t, s, name, "tcp", "m2")
		wantDelay(t, s, name, Delay{RTT: 2 * time.Millisecond})
	}
	wantChoice(t, s, "first", "tcp", "m")
}

// Values of one key queued behind a stalled write coalesce into one entry.
func TestQueueCoalesces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, release, writes := stalled(t, path, maxPending)
	s.SetSelectorChoice("proxy", "tcp", "first")
	waitFor(t, func() bool { // the writer holds the first value, stalled
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 0
	})
	for i := range 1000 {
		s.SetSelectorChoice("proxy", "tcp", "m"+strconv.Itoa(i))
	}
	s.mu.Lock()
	pending, resync := len(s.pending), s.resync
	s.mu.Unlock()
	if pending != 1 || resync {
		t.Fatalf("1000 values of one key queued as %d entries (resync %v)", pending, resync)
	}
	release()
	closeStore(t, s)
	if n := writes(); n != 2 {
		t.Errorf("%d writes, want 2 (the stalled one and the coalesced rest)", n)
	}
	s = Open(path, nil)
	defer closeStore(t, s)
	wantChoice(t, s, "proxy", "tcp", "m999")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// A failed write is logged once at warn; the values stay in memory and the
// next round writes them all.
func TestFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	log, logs := newLog()
	var mu sync.Mutex
	fail := true
	failing := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fail
	}
	s := open(path, log, options{lockTimeout: lockTimeout, maxPending: maxPending, beforeWrite: func() error {
		if failing() {
			return errors.New("disk on fire")
		}
		return nil
	}})
	s.SetSelectorChoice("a", "tcp", "1")
	waitFor(t, func() bool { return len(logs.lines("WARN")) == 1 })
	s.SetSelectorChoice("b", "tcp", "2")
	waitFor(t, func() bool { return len(logs.lines("DEBUG")) >= 1 })
	if w := logs.lines("WARN"); len(w) != 1 || !strings.Contains(w[0], "disk on fire") || !strings.Contains(w[0], "path="+path) {
		t.Fatalf("warn lines %q", w)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	s.SetSelectorChoice("c", "udp", "3")
	waitFor(t, func() bool { return len(logs.lines("INFO")) == 1 })
	closeStore(t, s)

	s = Open(path, nil)
	defer closeStore(t, s)
	wantChoice(t, s, "a", "tcp", "1")
	wantChoice(t, s, "b", "tcp", "2")
	wantChoice(t, s, "c", "udp", "3")
}

// Close reports a write that failed for good.
func TestCloseReportsAFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := open(path, nil, options{lockTimeout: lockTimeout, maxPending: maxPending,
		beforeWrite: func() error { return errors.New("disk on fire") }})
	s.SetSelectorChoice("a", "tcp", "1")
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Close = %v", err)
	}
}

// Entries that do not decode are skipped with a debug line; the others
// are read.
func TestUndecodableEntriesAreIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		c, err := tx.CreateBucket(bucketChoices)
		if err != nil {
			return err
		}
		d, err := tx.CreateBucket(bucketDelays)
		if err != nil {
			return err
		}
		for _, kv := range []struct {
			b    *bolt.Bucket
			k, v []byte
		}{
			{c, choiceKey("good", "tcp"), encodeChoice("hk")},
			{c, choiceKey("future", "tcp"), append([]byte{2}, "hk"...)},
			{c, []byte{0x05, 'a'}, encodeChoice("hk")},       // a name longer than the key
			{c, choiceKey("empty", "tcp"), []byte{}},         // no format byte
			{c, append(choiceKey("x", "tcp"), 0), []byte{1}}, // trailing key bytes
			{d, delayKey("good"), encodeDelay(Delay{RTT: time.Millisecond, At: time.Unix(100, 5)})},
			{d, delayKey("short"), []byte{1, 0x80}},
			{d, delayKey("long"), append(encodeDelay(Delay{}), 0)},
			{d, delayKey("nsec"), []byte{1, 0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03}}, // 1e9 ns
			{d, delayKey("future"), []byte{9, 0, 0, 0}},
		} {
			if err := kv.b.Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	log, logs := newLog()
	s := Open(path, log)
	defer closeStore(t, s)
	wantChoice(t, s, "good", "tcp", "hk")
	wantDelay(t, s, "good", Delay{RTT: time.Millisecond, At: time.Unix(100, 5)})
	for _, g := range []string{"future", "empty", "x"} {
		if _, ok := s.SelectorChoice(g, "tcp"); ok {
			t.Errorf("choice of %q came back", g)
		}
	}
	for _, n := range []string{"short", "long", "nsec", "future"} {
		if _, ok := s.LastDelay(n); ok {
			t.Errorf("delay of %q came back", n)
		}
	}
	if n := len(logs.lines("DEBUG")); n != 8 {
		t.Errorf("%d debug lines for 8 undecodable entries:\n%q", n, logs.lines("DEBUG"))
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
}

// A name too long for a bbolt key stays in memory and does not fail the
// writes of the others.
func TestOverlongNameStaysInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	long := strings.Repeat("n", bolt.MaxKeySize)
	s := Open(path, nil)
	s.SetLastDelay(long, Delay{RTT: time.Second})
	s.SetLastDelay("short", Delay{RTT: time.Millisecond})
	wantDelay(t, s, long, Delay{RTT: time.Second})
	closeStore(t, s)
	s = Open(path, nil)
	defer closeStore(t, s)
	if _, ok := s.LastDelay(long); ok {
		t.Fatal("an overlong name reached the file")
	}
	wantDelay(t, s, "short", Delay{RTT: time.Millisecond})
}

// After Close, a Set is kept in memory and starts nothing.
func TestSetAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := Open(path, nil)
	closeStore(t, s)
	s.SetSelectorChoice("proxy", "tcp", "hk")
	wantChoice(t, s, "proxy", "tcp", "hk")
	s = Open(path, nil)
	defer closeStore(t, s)
	if _, ok := s.SelectorChoice("proxy", "tcp"); ok {
		t.Fatal("a Set after Close reached the file")
	}
}
