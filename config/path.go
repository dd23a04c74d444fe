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

// String writes the path the way error texts name keys. A key that is not a
// bare TOML key is quoted.
func (p keyPath) String() string { return string(p.appendTo(nil)) }

// appendTo appends the path as String writes it to b.
func (p keyPath) appendTo(b []byte) []byte {
	for i, part := range p {
		switch {
		case part.isIndex:
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(part.index), 10)
			b = append(b, ']')
		case i > 0:
			b = append(b, '.')
			b = appendKey(b, part.name)
		default:
			b = appendKey(b, part.name)
		}
	}
	return b
}

// clone returns a copy of p that a later walk step does not overwrite.
func (p keyPath) clone() keyPath { return append(keyPath(nil), p...) }

// appendKey appends a key name, quoted unless it is a bare TOML key.
func appendKey(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(b, s...)
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

// quoteKey is a key name as error texts write it: quoted unless it is a
// bare TOML key.
func quoteKey(s string) string { return string(appendKey(nil, s)) }
