package store

import (
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FakeIPMapping is one name the fake IP pool answers with addresses of its
// own, and when a flow or a query last used them.
type FakeIPMapping struct {
	Name     string
	V4, V6   netip.Addr // invalid: none in that family
	LastUsed time.Time
}

// FakeIPs returns the fake IP mappings as last set, in the order they were
// given; nil when none were. The slice is the caller's.
func (s *Store) FakeIPs() []FakeIPMapping {
	s.mu.Lock()
	enc := s.fakeIPs // never changed once set: decoded outside the lock
	s.mu.Unlock()
	if enc == nil {
		return nil
	}
	ms, err := decodeFakeIPs(enc)
	if err != nil { // the store keeps only values that decode
		return nil
	}
	return ms
}

// SetFakeIPs replaces the fake IP mappings with ms, whole: the store keeps
// what it is given, no more, and holds no reference to ms. Each call writes
// the whole set, so a pool saves it now and then (on a timer, at shutdown),
// not on every answer. It never blocks on the file; the mappings are
// encoded before the store's lock is taken. A zone of an address is not
// kept, and LastUsed keeps no monotonic reading.
func (s *Store) SetFakeIPs(ms []FakeIPMapping) {
	enc := encodeFakeIPs(ms)
	s.mu.Lock()
	s.fakeIPs = enc
	if len(enc) > bolt.MaxValueSize {
		s.log.Debug("a fake IP set this large is kept in memory only", "path", s.path, "bytes", len(enc))
	} else {
		s.queueLocked(bucketFakeIPs, fakeIPsKey, func() []byte { return enc })
	}
	s.mu.Unlock()
	s.signal()
}
