package fakeip

import (
	"fmt"
	"strings"
)

// maxName is the longest name (without its trailing dot) the table keeps:
// the longest a DNS name can be.
const maxName = 253

// normalize returns name in ASCII lowercase without its trailing dot. It
// allocates only when name has an uppercase letter.
func normalize(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

// filter is a set of domain suffixes.
type filter map[string]struct{}

func newFilter(suffixes []string) (filter, error) {
	f := make(filter, len(suffixes))
	for _, s := range suffixes {
		n := strings.TrimPrefix(normalize(s), ".")
		if n == "" {
			return nil, fmt.Errorf("fake ip: filter entry %q names no domain", s)
		}
		f[n] = struct{}{}
	}
	return f, nil
}

// match reports whether name (normalized) is one of the suffixes or under
// one. It looks up each of name's suffixes that starts at a label; it
// allocates nothing.
func (f filter) match(name string) bool {
	if len(f) == 0 {
		return false
	}
	for {
		if _, ok := f[name]; ok {
			return true
		}
		dot := strings.IndexByte(name, '.')
		if dot < 0 {
			return false
		}
		name = name[dot+1:]
	}
}
