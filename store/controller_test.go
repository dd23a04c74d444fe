package store

import (
	"path/filepath"
	"testing"
)

func TestControllerSettingsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := Open(path, nil)
	if _, ok := s.Mode(); ok {
		t.Fatal("a mode in a new store")
	}
	if _, ok := s.GlobalChoice(); ok {
		t.Fatal("a GLOBAL choice in a new store")
	}
	s.SetMode(ModeChoice{Mode: "rule", File: "rule"})
	s.SetMode(ModeChoice{Mode: "global", File: "rule"}) // the latest wins
	s.SetGlobalChoice("hk")
	s.SetSelectorChoice("GLOBAL", "tcp", "jp") // a selector's choices are apart
	closeStore(t, s)

	s = Open(path, nil)
	if m, ok := s.Mode(); !ok || m != (ModeChoice{Mode: "global", File: "rule"}) {
		t.Fatalf("mode after a restart: %+v %v", m, ok)
	}
	if g, ok := s.GlobalChoice(); !ok || g != "hk" {
		t.Fatalf("GLOBAL choice after a restart: %q %v", g, ok)
	}
	s.SetGlobalChoice("") // cleared
	closeStore(t, s)

	s = Open(path, nil)
	defer closeStore(t, s)
	if g, ok := s.GlobalChoice(); !ok || g != "" {
		t.Fatalf("a cleared GLOBAL choice after a restart: %q %v", g, ok)
	}
	wantChoice(t, s, "GLOBAL", "tcp", "jp")
}

// A full write (after the queue overflowed) carries the controller's
// settings too.
func TestControllerSettingsInAFullWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := open(path, nil, options{lockTimeout: lockTimeout, maxPending: 1})
	s.mu.Lock()
	s.resync = true // what an overflow leaves
	s.mu.Unlock()
	s.SetMode(ModeChoice{Mode: "direct", File: "global"})
	s.SetGlobalChoice("proxy")
	closeStore(t, s)
	s = Open(path, nil)
	defer closeStore(t, s)
	if m, ok := s.Mode(); !ok || m != (ModeChoice{Mode: "direct", File: "global"}) {
		t.Fatalf("mode: %+v %v", m, ok)
	}
	if g, _ := s.GlobalChoice(); g != "proxy" {
		t.Fatalf("GLOBAL choice: %q", g)
	}
}

func TestModeCodec(t *testing.T) {
	for _, m := range []ModeChoice{{}, {Mode: "global", File: "rule"}} {
		if got, err := decodeMode(encodeMode(m)); err != nil || got != m {
			t.Errorf("%+v: %+v %v", m, got, err)
		}
	}
	for _, b := range [][]byte{nil, {2}, {1}, {1, 5, 'a'}, append(encodeMode(ModeChoice{Mode: "rule"}), 0)} {
		if _, err := decodeMode(b); err == nil {
			t.Errorf("%x decoded", b)
		}
	}
}
