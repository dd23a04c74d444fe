package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The kinds of resource.
const (
	KindProvider = "provider"
	KindRuleSet  = "rule_set"
)

// The size limits of a download's body, by kind.
const (
	MaxProviderSize = 32 << 20
	MaxRuleSetSize  = 64 << 20
)

// Resource is one url provider or rule set.
type Resource struct {
	Kind     string // KindProvider | KindRuleSet
	Tag      string
	URL      string
	Interval time.Duration // 0: at start and on demand only
	Via      string        // the outbound or group tag the download dials through
	// CachePath is where the last good copy is kept (its meta beside it).
	CachePath string
	// MaxSize bounds the body; 0 is the kind's limit.
	MaxSize int64
	// Validate, when set, refuses content that must not replace the
	// cached copy (a provider that does not parse or has no node, a rule
	// set that does not load); it returns the content's node or rule
	// count.
	Validate func([]byte) (int, error)
}

// name is how logs and errors name the resource: "provider sub".
func (r *Resource) name() string {
	kind := r.Kind
	if kind == KindRuleSet {
		kind = "rule set"
	}
	return kind + " " + r.Tag
}

func (r *Resource) maxSize() int64 {
	switch {
	case r.MaxSize > 0:
		return r.MaxSize
	case r.Kind == KindRuleSet:
		return MaxRuleSetSize
	}
	return MaxProviderSize
}

// same reports whether two resources download the same thing the same way
// (Validate aside).
func (r *Resource) same(o *Resource) bool {
	return r.Kind == o.Kind && r.Tag == o.Tag && r.URL == o.URL && r.Interval == o.Interval &&
		r.Via == o.Via && r.CachePath == o.CachePath && r.MaxSize == o.MaxSize
}

// Meta is what is kept beside a cached copy.
type Meta struct {
	// URL is the address the copy came from: a copy of another URL (the
	// file's url changed) is not revalidated with its ETag.
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// FetchedAt is the last download that reached the server (a 200 or a
	// 304); UpdatedAt the last one that changed the content.
	FetchedAt time.Time `json:"fetched_at"`
	UpdatedAt time.Time `json:"updated_at"`
	SHA256    string    `json:"sha256"`
	Size      int64     `json:"size"`
	// Entries is the content's node or rule count (Validate's).
	Entries int `json:"entries"`
	// UserInfo is the last subscription-userinfo header seen.
	UserInfo *UserInfo `json:"subscription_userinfo,omitempty"`
}

// MetaPath is where the meta of the copy at cachePath is kept.
func MetaPath(cachePath string) string { return cachePath + ".meta.json" }

// maxMetaSize bounds the meta file read.
const maxMetaSize = 64 << 10

// ReadMeta reads the meta of the copy at cachePath. ok is false when there
// is no cached copy. A copy without a (readable) meta, put there by hand,
// gets one from the file: its modification time, no validators.
func ReadMeta(cachePath string) (m Meta, ok bool) {
	fi, err := os.Stat(cachePath)
	if err != nil || !fi.Mode().IsRegular() {
		return Meta{}, false
	}
	f, err := os.Open(MetaPath(cachePath))
	if err == nil {
		b, rerr := io.ReadAll(io.LimitReader(f, maxMetaSize))
		f.Close()
		if rerr == nil && json.Unmarshal(b, &m) == nil && m.Size == fi.Size() {
			return m, true
		}
	}
	return Meta{FetchedAt: fi.ModTime(), UpdatedAt: fi.ModTime(), Size: fi.Size()}, true
}

// writeMeta writes m beside the copy at cachePath.
func writeMeta(cachePath string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(MetaPath(cachePath), append(b, '\n'))
}

// writeFile writes data to path atomically: a temporary file in the same
// folder, synced, renamed over path. Folders are created (0700); the file
// is 0600.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, unwrapPath(err))
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
