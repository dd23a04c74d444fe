package store

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func sampleFakeIPs() []FakeIPMapping {
	at := time.Date(2026, 5, 1, 12, 30, 45, 123456789, time.UTC)
	return []FakeIPMapping{
		{Name: "example.com", V4: netip.MustParseAddr("198.18.0.1"), V6: netip.MustParseAddr("fc00::1"), LastUsed: at},
		{Name: "v4.example", V4: netip.MustParseAddr("198.18.0.2"), LastUsed: at.Add(-time.Hour)},
		{Name: "v6.example", V6: netip.MustParseAddr("fc00::2"), LastUsed: at.Add(time.Minute)},
		{Name: "", LastUsed: time.Time{}}, // nothing is refused: the store keeps what it is given
	}
}

func wantFakeIPs(t *testing.T, s *Store, want []FakeIPMapping) {
	t.Helper()
	got := s.FakeIPs()
	if len(got) != len(want) {
		t.Fatalf("FakeIPs() = %+v; want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.V4 != w.V4 || g.V6 != w.V6 || !g.LastUsed.Equal(w.LastUsed) {
			t.Fatalf("FakeIPs()[%d] = %+v; want %+v", i, g, w)
		}
	}
}

func TestFakeIPsMemoryOnly(t *testing.T) {
	s := Open("", nil)
	if got := s.FakeIPs(); got != nil {
		t.Fatalf("an empty store has fake IPs %+v", got)
	}
	in := sampleFakeIPs()
	s.SetFakeIPs(in[:1])
	s.SetFakeIPs(in) // the latest set wins, whole
	in[0].Name = "changed.example"
	want := sampleFakeIPs()
	wantFakeIPs(t, s, want)

	got := s.FakeIPs()
	got[1].Name = "mine"
	wantFakeIPs(t, s, want) // the returned slice is the caller's

	closeStore(t, s)
	wantFakeIPs(t, s, want)
	s.SetFakeIPs(nil)
	if got := s.FakeIPs(); got != nil {
		t.Fatalf("after SetFakeIPs(nil), FakeIPs() = %+v", got)
	}
}

func TestFakeIPsPersistAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	log, logs := newLog()
	s := Open(path, log)
	s.SetFakeIPs(sampleFakeIPs()[1:])
	s.SetSelectorChoice("proxy", "tcp", "hk")
	s.SetFakeIPs(sampleFakeIPs()) // replaces the first set
	closeStore(t, s)

	s = Open(path, log)
	wantFakeIPs(t, s, sampleFakeIPs())
	wantChoice(t, s, "proxy", "tcp", "hk")
	s.SetFakeIPs(nil) // an empty set replaces a full one
	closeStore(t, s)

	s = Open(path, log)
	defer closeStore(t, s)
	if got := s.FakeIPs(); got != nil {
		t.Fatalf("an emptied set came back as %+v", got)
	}
	wantChoice(t, s, "proxy", "tcp", "hk")
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Fatalf("warnings: %q", w)
	}
}

// The fake IP set rides the same queue as the other values: when the queue
// overflows behind a stalled write, the whole-copy write that follows has
// the set too.
func TestFakeIPsSurviveAQueueOverflow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, release, _ := stalled(t, path, 2)
	s.SetSelectorChoice("first", "tcp", "m")
	waitFor(t, func() bool { // the writer holds the first value, stalled
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 0
	})
	s.SetFakeIPs(sampleFakeIPs())
	for i := range 10 {
		s.SetSelectorChoice("g"+strconv.Itoa(i), "tcp", "m")
	}
	s.mu.Lock()
	resync := s.resync
	s.mu.Unlock()
	if !resync {
		t.Fatal("the queue did not overflow")
	}
	release()
	closeStore(t, s)

	s = Open(path, nil)
	defer closeStore(t, s)
	wantFakeIPs(t, s, sampleFakeIPs())
	wantChoice(t, s, "g9", "tcp", "m")
}

// A fake IP value that does not decode is ignored with a debug line; the
// rest of the file is read.
func TestUndecodableFakeIPsAreIgnored(t *testing.T) {
	good := encodeFakeIPs(sampleFakeIPs())
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"future format", append([]byte{2}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
		{"an address of 5 bytes", []byte{1, 1, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0}},
		{"more mappings than bytes", []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "switchyard.db")
			s := Open(path, nil)
			s.SetSelectorChoice("proxy", "tcp", "hk")
			closeStore(t, s)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketFakeIPs).Put(fakeIPsKey, tc.value)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			log, logs := newLog()
			s = Open(path, log)
			defer closeStore(t, s)
			if got := s.FakeIPs(); got != nil {
				t.Fatalf("an undecodable set came back as %+v", got)
			}
			wantChoice(t, s, "proxy", "tcp", "hk")
			debug := logs.lines("DEBUG")
			if len(debug) != 1 || !strings.Contains(debug[0], "bucket=fake_ips") || !strings.Contains(debug[0], "does not decode") {
				t.Fatalf("want one debug line naming the bucket, got %q", debug)
			}
			if w := logs.lines("WARN"); len(w) != 0 {
				t.Fatalf("warnings %q", w)
			}
			// A new set replaces the undecodable one.
			s.SetFakeIPs(sampleFakeIPs()[:1])
			wantFakeIPs(t, s, sampleFakeIPs()[:1])
		})
	}
}

func TestFakeIPsCodec(t *testing.T) {
	ms := append(sampleFakeIPs(),
		FakeIPMapping{Name: "mapped.example", V4: netip.MustParseAddr("::ffff:198.18.0.9"), LastUsed: time.Unix(1, 2)},
		FakeIPMapping{Name: "日本.example", V6: netip.MustParseAddr("fe80::1%eth0"), LastUsed: time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC)},
	)
	got, err := decodeFakeIPs(encodeFakeIPs(ms))
	if err != nil || len(got) != len(ms) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for i, m := range ms {
		m.V6 = m.V6.WithZone("") // zones are not kept
		if g := got[i]; g.Name != m.Name || g.V4 != m.V4 || g.V6 != m.V6 || !g.LastUsed.Equal(m.LastUsed) {
			t.Errorf("mapping %d: %+v, want %+v", i, g, m)
		}
	}
	if got, err := decodeFakeIPs(encodeFakeIPs(nil)); got != nil || err != nil {
		t.Errorf("an empty set decodes to %+v, %v", got, err)
	}
	// The encoding is the documented one.
	one := []FakeIPMapping{{Name: "ab", V4: netip.MustParseAddr("1.2.3.4"), LastUsed: time.Unix(1, 2)}}
	if got, want := encodeFakeIPs(one), []byte{1, 1, 2, 'a', 'b', 4, 1, 2, 3, 4, 0, 2, 2}; !bytes.Equal(got, want) {
		t.Errorf("encodeFakeIPs = %x, want %x", got, want)
	}
}
