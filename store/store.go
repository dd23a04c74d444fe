package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"switchyard/internal/clip"
)

// Delay is the last real delay measured through a node, and when.
type Delay struct {
	RTT time.Duration
	At  time.Time
}

// lockTimeout is how long Open waits for another process to let go of the
// file before running in memory.
const lockTimeout = time.Second

// maxPending is how many keys the write queue holds. Past it the queue is
// dropped and the next round writes everything (see doc.go): a store has a
// few keys per group and node, so this is reached only when the disk stalls
// while the values of more keys than that change.
const maxPending = 1024

// Store is the persistent state. Its methods are safe for concurrent use.
type Store struct {
	log  *slog.Logger
	path string
	db   *bolt.DB // nil: memory only
	opts options

	// mu guards the fields below. It is never held across a write to the
	// file.
	mu      sync.Mutex
	choices map[choice]string
	delays  map[string]Delay
	fakeIPs []byte // the encoded fake IP mappings; nil: never set
	// The controller's settings (controller.go), each with whether set.
	mode      ModeChoice
	hasMode   bool
	global    string
	hasGlobal bool
	pending   map[entry][]byte // latest encoded value per key, not written yet
	resync    bool             // the queue overflowed or a write failed: write everything
	closed    bool

	wake      chan struct{} // capacity 1: something is pending
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the writer has returned
	closeOnce sync.Once
	closeErr  error

	// Owned by the writer goroutine (read by Close after done).
	failing  bool  // the last write failed
	writeErr error // the last write's error, nil once one succeeds
}

type choice struct{ group, network string }

// entry is a key of the file: its bucket and its encoded key.
type entry struct {
	bucket string
	key    string
}

// options are the knobs the tests turn.
type options struct {
	lockTimeout time.Duration
	maxPending  int
	// beforeWrite runs on the writer before each write to the file; an
	// error fails that write as the file would.
	beforeWrite func() error
}

// Open opens the state file at path, creating it when missing, and reads
// it; path "" keeps the state in memory only. A file that cannot be used
// (held by another process, corrupt, not creatable) is logged at warn with
// its path and the reason, and the store runs in memory: Open never fails.
// log nil discards the store's lines. Close the store when done with it.
func Open(path string, log *slog.Logger) *Store {
	return open(path, log, options{lockTimeout: lockTimeout, maxPending: maxPending})
}

func open(path string, log *slog.Logger, o options) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log, path: path, opts: o}
	s.reset()
	if path == "" {
		return s
	}
	db, err := s.openFile()
	if err != nil {
		reason := err.Error()
		if errors.Is(err, bolterrors.ErrTimeout) {
			reason = "another process holds it"
		}
		log.Warn("the state file cannot be used: selector choices, delays and fake IP mappings are kept in memory for this run",
			"path", path, "reason", reason)
		s.reset() // whatever a failed read left
		return s
	}
	s.db = db
	s.pending = map[entry][]byte{}
	s.wake = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.run()
	return s
}

func (s *Store) reset() {
	s.choices = map[choice]string{}
	s.delays = map[string]Delay{}
	s.fakeIPs = nil
	s.mode, s.hasMode, s.global, s.hasGlobal = ModeChoice{}, false, "", false
}

// openFile checks, opens and reads the file, creating it when missing. A
// file that fails the check is not opened for writing: bbolt may write
// while it opens a file, and nothing is written into a damaged one.
func (s *Store) openFile() (db *bolt.DB, err error) {
	if fi, err := os.Stat(s.path); err == nil && fi.Size() > 0 {
		if err := s.check(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if r := recover(); r != nil { // bbolt panics on some damage it meets
			err = fmt.Errorf("corrupt: %v", r)
		}
		if err != nil && db != nil {
			db.Close()
			db = nil
		}
	}()
	db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.opts.lockTimeout})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketChoices, bucketDelays, bucketFakeIPs, bucketController} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return db, err
	}
	return db, db.View(s.read)
}

// check opens the file read-only and runs bbolt's consistency check on it.
func (s *Store) check() (err error) {
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{ReadOnly: true, Timeout: s.opts.lockTimeout})
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt: %v", r)
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for e := range tx.Check() { // drained: Check's goroutine ends with it
			if first == nil {
				first = e
			}
		}
		if first != nil {
			return fmt.Errorf("corrupt: %w", first)
		}
		return nil
	})
}

// read fills the memory copy from the file. Entries that do not decode are
// ignored.
func (s *Store) read(tx *bolt.Tx) error {
	err := tx.Bucket(bucketChoices).ForEach(func(k, v []byte) error {
		group, network, err := decodeChoiceKey(k)
		if err != nil {
			s.ignored(bucketChoices, k, err)
			return nil
		}
		member, err := decodeChoice(v)
		if err != nil {
			s.ignored(bucketChoices, k, err)
			return nil
		}
		s.choices[choice{group, network}] = member
		return nil
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketDelays).ForEach(func(k, v []byte) error {
		node, err := decodeDelayKey(k)
		if err != nil {
			s.ignored(bucketDelays, k, err)
			return nil
		}
		d, err := decodeDelay(v)
		if err != nil {
			s.ignored(bucketDelays, k, err)
			return nil
		}
		s.delays[node] = d
		return nil
	})
	if err != nil {
		return err
	}
	// One value; other keys of the bucket are not read.
	if v := tx.Bucket(bucketFakeIPs).Get(fakeIPsKey); v != nil {
		if _, err := decodeFakeIPs(v); err != nil {
			s.ignored(bucketFakeIPs, fakeIPsKey, err)
		} else {
			s.fakeIPs = bytes.Clone(v) // v lives as long as the transaction
		}
	}
	s.readController(tx)
	return nil
}

func (s *Store) ignored(bucket, key []byte, err error) {
	s.log.Debug("a state entry that does not decode is ignored", "path", s.path, "bucket", string(bucket),
		"key", clip.Quote(string(key)), "error", err)
}

// SelectorChoice returns the member the selector group chose for network
// ("tcp" or "udp"), as last set.
func (s *Store) SelectorChoice(group, network string) (member string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	member, ok = s.choices[choice{group, network}]
	return member, ok
}

// SetSelectorChoice records the member the selector group chose for
// network. It never blocks on the file.
func (s *Store) SetSelectorChoice(group, network, member string) {
	s.mu.Lock()
	s.choices[choice{group, network}] = member
	s.queueLocked(bucketChoices, choiceKey(group, network), func() []byte { return encodeChoice(member) })
	s.mu.Unlock()
	s.signal()
}

// LastDelay returns the last real delay set for node.
func (s *Store) LastDelay(node string) (Delay, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.delays[node]
	return d, ok
}

// SetLastDelay records the last real delay measured through node. Its time
// keeps no monotonic reading (it is a wall clock time once read back from
// the file). It never blocks on the file.
func (s *Store) SetLastDelay(node string, d Delay) {
	d.At = d.At.Round(0)
	s.mu.Lock()
	s.delays[node] = d
	s.queueLocked(bucketDelays, delayKey(node), func() []byte { return encodeDelay(d) })
	s.mu.Unlock()
	s.signal()
}

// queueLocked queues the value of key for the writer: the latest value of
// a key replaces the one queued. A key too long for the file stays in
// memory only.
func (s *Store) queueLocked(bucket, key []byte, value func() []byte) {
	if s.db == nil || s.closed {
		return
	}
	if len(key) > bolt.MaxKeySize {
		s.log.Debug("a state entry with a name this long is kept in memory only", "path", s.path, "bytes", len(key))
		return
	}
	if s.resync {
		return // the next round writes everything
	}
	e := entry{string(bucket), string(key)}
	if _, queued := s.pending[e]; !queued && len(s.pending) >= s.opts.maxPending {
		s.pending = map[entry][]byte{}
		s.resync = true
		return
	}
	s.pending[e] = value()
}

// signal wakes the writer, without waiting.
func (s *Store) signal() {
	if s.wake == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer: it writes what is queued whenever something is, and
// once more when the store closes.
func (s *Store) run() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
			s.flush()
		case <-s.stop:
			s.flush()
			return
		}
	}
}

// flush writes the queue, or everything when the queue overflowed or the
// last write failed, in one transaction.
func (s *Store) flush() {
	var batch map[entry][]byte // the writer's own, once taken
	s.mu.Lock()
	switch {
	case s.resync:
		batch = s.snapshotLocked()
		s.resync = false
	case len(s.pending) > 0:
		batch = s.pending
		s.pending = map[entry][]byte{}
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := s.write(batch)
	s.writeErr = err
	switch {
	case err != nil:
		s.mu.Lock()
		s.pending = map[entry][]byte{}
		s.resync = true // the memory copy has every value the failed write had
		s.mu.Unlock()
		if s.failing {
			s.log.Debug("writing the state file failed again", "path", s.path, "error", err)
		} else {
			s.log.Warn("writing the state file failed: the values are kept in memory and written again on the next change",
				"path", s.path, "error", err)
		}
		s.failing = true
	case s.failing:
		s.log.Info("writing the state file works again", "path", s.path)
		s.failing = false
	}
}

// write puts batch into the file in one transaction.
func (s *Store) write(batch map[entry][]byte) error {
	if s.opts.beforeWrite != nil {
		if err := s.opts.beforeWrite(); err != nil {
			return err
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for e, v := range batch {
			if err := tx.Bucket([]byte(e.bucket)).Put([]byte(e.key), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// snapshotLocked encodes every value in memory.
func (s *Store) snapshotLocked() map[entry][]byte {
	out := make(map[entry][]byte, len(s.choices)+len(s.delays)+1)
	for c, member := range s.choices {
		if k := choiceKey(c.group, c.network); len(k) <= bolt.MaxKeySize {
			out[entry{string(bucketChoices), string(k)}] = encodeChoice(member)
		}
	}
	for node, d := range s.delays {
		if k := delayKey(node); len(k) <= bolt.MaxKeySize {
			out[entry{string(bucketDelays), string(k)}] = encodeDelay(d)
		}
	}
	if s.fakeIPs != nil && len(s.fakeIPs) <= bolt.MaxValueSize {
		out[entry{string(bucketFakeIPs), string(fakeIPsKey)}] = s.fakeIPs
	}
	s.snapshotController(out)
	return out
}

// Close writes what is queued, stops the writer and closes the file. The
// values stay readable; later Sets are kept in memory only. Close is
// idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if s.db == nil {
			return
		}
		close(s.stop)
		<-s.done
		var werr error
		if s.writeErr != nil {
			werr = fmt.Errorf("store: writing %s: %w", s.path, s.writeErr)
		}
		var cerr error
		if err := s.db.Close(); err != nil {
			cerr = fmt.Errorf("store: closing %s: %w", s.path, err)
		}
		s.closeErr = errors.Join(werr, cerr)
	})
	return s.closeErr
}
