package config

import (
	"strconv"
	"strings"
)

// keyPath names a place in the document: table and key names, and indexes
// into arrays ("inbounds[1].users[0].username").
type keyPath []pathPart

// pathPart is a key name, or an array index when isIndex is set.
type pathPart struct {
	name    string
	index   int
	isIndex bool
}

func (p keyPath) key(name string) keyPath {
	return append(p[:len(p):len(p)], pathPart{name: name})
}

func (p keyPath) elem(i int) keyPath {
	return append(p[:len(p):len(p)], pathPart{index: i, isIndex: true})
}

// String writes the path the way error texts name keys. A key that is not a
// bare TOML key is quoted.
func (p keyPath) String() string {
	var b strings.Builder
	for i, part := range p {
		switch {
		case part.isIndex:
			b.WriteString("[" + strconv.Itoa(part.index) + "]")
		case i > 0:
			b.WriteString("." + quoteKey(part.name))
		default:
			b.WriteString(quoteKey(part.name))
		}
	}
	return b.String()
}

// last returns the last key name in the path ("" for none).
func (p keyPath) last() string {
	for i := len(p) - 1; i >= 0; i-- {
		if !p[i].isIndex {
			return p[i].name
		}
	}
	return ""
}

func quoteKey(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(s)
		}
	}
	return s
}

// parentKey strips the last part of a key written by keyPath.String:
// "a.b[2]" -> "a.b", "a.b" -> "a", "a" -> "". Keys the loader builds are
// bare, so quoting does not get in the way.
func parentKey(k string) string {
	if strings.HasSuffix(k, "]") {
		if i := strings.LastIndexByte(k, '['); i >= 0 {
			return k[:i]
		}
	}
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}
