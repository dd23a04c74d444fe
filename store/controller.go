package store

import (
	bolt "go.etcd.io/bbolt"
)

// The controller's settings: the routing mode the API set (with the file's
// mode it replaced) and the GLOBAL selector's choice. They live in a bucket
// of their own, "controller", so no group tag can name them.
var (
	bucketController = []byte("controller")
	modeKey          = appendName(nil, "mode")
	globalKey        = appendName(nil, "global")
)

// ModeChoice is the routing mode the API set, and the mode the
// configuration file said when it was set.
type ModeChoice struct {
	Mode string
	File string
}

// Mode returns the routing mode the API set, as last set.
func (s *Store) Mode() (ModeChoice, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mode, s.hasMode
	return m, ok
}

// SetMode records the routing mode the API set. It never blocks on the
// file.
func (s *Store) SetMode(m ModeChoice) {
	s.mu.Lock()
	s.mode, s.hasMode = m, true
	s.queueLocked(bucketController, modeKey, func() []byte { return encodeMode(m) })
	s.mu.Unlock()
	s.signal()
}

// GlobalChoice returns the member the GLOBAL selector chose, as last set;
// "" is a choice cleared.
func (s *Store) GlobalChoice() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.global, s.hasGlobal
}

// SetGlobalChoice records the GLOBAL selector's choice ("" clears it). It
// never blocks on the file.
func (s *Store) SetGlobalChoice(member string) {
	s.mu.Lock()
	s.global, s.hasGlobal = member, true
	s.queueLocked(bucketController, globalKey, func() []byte { return encodeChoice(member) })
	s.mu.Unlock()
	s.signal()
}

// readController fills the controller's settings from the file; a value
// that does not decode is ignored.
func (s *Store) readController(tx *bolt.Tx) {
	b := tx.Bucket(bucketController)
	if v := b.Get(modeKey); v != nil {
		if m, err := decodeMode(v); err != nil {
			s.ignored(bucketController, modeKey, err)
		} else {
			s.mode, s.hasMode = m, true
		}
	}
	if v := b.Get(globalKey); v != nil {
		if g, err := decodeChoice(v); err != nil {
			s.ignored(bucketController, globalKey, err)
		} else {
			s.global, s.hasGlobal = g, true
		}
	}
}

// snapshotController adds the controller's settings to a full write.
func (s *Store) snapshotController(out map[entry][]byte) {
	if s.hasMode {
		out[entry{string(bucketController), string(modeKey)}] = encodeMode(s.mode)
	}
	if s.hasGlobal && len(s.global) < bolt.MaxValueSize {
		out[entry{string(bucketController), string(globalKey)}] = encodeChoice(s.global)
	}
}

func encodeMode(m ModeChoice) []byte {
	return appendName(appendName([]byte{formatV1}, m.Mode), m.File)
}

func decodeMode(b []byte) (ModeChoice, error) {
	if len(b) == 0 || b[0] != formatV1 {
		return ModeChoice{}, errFormat
	}
	mode, b, err := readName(b[1:])
	if err != nil {
		return ModeChoice{}, err
	}
	file, b, err := readName(b)
	if err != nil {
		return ModeChoice{}, err
	}
	if len(b) > 0 {
		return ModeChoice{}, errTrailing
	}
	return ModeChoice{Mode: mode, File: file}, nil
}
