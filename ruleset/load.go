package ruleset

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// Formats are the rule-set formats Load reads.
var Formats = []string{"srs", "source", "clash-domain", "clash-ipcidr", "clash-classical"}

// MaxFileSize bounds a rule-set file; a larger one is refused.
const MaxFileSize = 64 << 20

// cacheSize bounds the compiled sets kept for reuse across reloads.
const cacheSize = 32

type cacheKey struct {
	format string
	sum    [sha256.Size]byte
}

// cache holds compiled sets by format and content hash: a reload that
// finds a rule-set file unchanged reuses its compiled form. It is bounded;
// the least recently used set is dropped first.
var cache = struct {
	sync.Mutex
	m     map[cacheKey]*Set
	order []cacheKey // least recently used first
}{m: map[cacheKey]*Set{}}

func cacheGet(k cacheKey) *Set {
	cache.Lock()
	defer cache.Unlock()
	s := cache.m[k]
	if s != nil {
		touch(k)
	}
	return s
}

func touch(k cacheKey) {
	for i, o := range cache.order {
		if o == k {
			cache.order = append(cache.order[:i], cache.order[i+1:]...)
			break
		}
	}
	cache.order = append(cache.order, k)
}

func cachePut(k cacheKey, s *Set) {
	cache.Lock()
	defer cache.Unlock()
	if _, ok := cache.m[k]; !ok && len(cache.order) >= cacheSize {
		delete(cache.m, cache.order[0])
		cache.order = cache.order[1:]
	}
	cache.m[k] = s
	touch(k)
}

// Load reads and compiles the rule set at path in format. A file whose
// content (and format) was compiled before is not compiled again. A file
// that does not load is an *Error naming the file and the line or offset.
func Load(path, format string) (*Set, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Msg: err.Error()}
	}
	s, compiled, err := parseCached(path, format, data)
	if compiled && len(data) >= releaseAfter {
		// The file, the inflated rules and the builders' spare room are
		// garbage now: return them to the system once, rather than have
		// the process keep the load's peak.
		debug.FreeOSMemory()
	}
	return s, err
}

// releaseAfter is the file size from which a load returns its transient
// memory to the system when done.
const releaseAfter = 256 << 10

// Parse compiles data, the content of the rule set at path, in format.
func Parse(path, format string, data []byte) (*Set, error) {
	s, _, err := parseCached(path, format, data)
	return s, err
}

// parseCached is Parse, and whether it compiled (rather than found the
// compiled form in the cache).
func parseCached(path, format string, data []byte) (*Set, bool, error) {
	k := cacheKey{format: format, sum: sha256.Sum256(data)}
	if s := cacheGet(k); s != nil {
		return s, false, nil
	}
	var c compiler
	if err := parse(format, data, &c); err != nil {
		e := &Error{Path: path, Offset: -1, Msg: err.Error()}
		var le *lineError
		var oe *offsetError
		switch {
		case errors.As(err, &le):
			e.Line, e.Msg = le.line, le.msg
		case errors.As(err, &oe):
			e.Offset, e.Msg = oe.off, oe.msg
		}
		return nil, true, e
	}
	s := c.finish()
	cachePut(k, s)
	return s, true, nil
}

// parse reads data in format, giving c each rule as it is read.
func parse(format string, data []byte, c *compiler) error {
	switch format {
	case "srs":
		return parseSRS(data, c)
	case "source":
		return parseSource(data, c)
	case "clash-domain":
		return parseClashDomain(data, c)
	case "clash-ipcidr":
		return parseClashIPCIDR(data, c)
	case "clash-classical":
		return parseClashClassical(data, c)
	}
	return fmt.Errorf("unknown format %q", format)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d MiB", MaxFileSize>>20)
	}
	return data, nil
}
