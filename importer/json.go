package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// jnode is one JSON value with the line it starts on.
type jnode struct {
	line int
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*jnode // object values, in key order; array elements
	str  string   // string, or a number's text
	b    bool
}

// maxJSONDepth bounds nesting.
const maxJSONDepth = 64

// jsonText reports whether content is JSON (its first byte after
// whitespace and comments is '{') and returns it with comments blanked:
// sing-box reads its configuration with // and /* */ comments.
func jsonText(content []byte) ([]byte, bool) {
	out := stripComments(content)
	t := bytes.TrimLeft(out, " \t\r\n")
	return out, len(t) > 0 && t[0] == '{'
}

// stripComments replaces comments outside strings with spaces, keeping
// every newline so that lines still count.
func stripComments(b []byte) []byte {
	out := bytes.Clone(b)
	inStr := false
	for i := 0; i < len(out); i++ {
		ch := out[i]
		switch {
		case inStr:
			if ch == '\\' {
				i++
			} else if ch == '"' {
				inStr = false
			}
		case ch == '"':
			inStr = true
		case ch == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case ch == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			j := i + 2
			for j < len(out) {
				if out[j] == '*' && j+1 < len(out) && out[j+1] == '/' {
					out[j], out[j+1] = ' ', ' '
					j += 2
					break
				}
				if out[j] != '\n' {
					out[j] = ' '
				}
				j++
			}
			i = j - 1
		}
	}
	return out
}

// parseJSON reads one JSON value, recording each value's line from the
// decoder's offsets.
func parseJSON(b []byte) (*jnode, error) {
	var nl []int
	for i, ch := range b {
		if ch == '\n' {
			nl = append(nl, i)
		}
	}
	lineAt := func(off int64) int { return sort.SearchInts(nl, int(off)) + 1 }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var read func(depth int) (*jnode, error)
	read = func(depth int) (*jnode, error) {
		if depth > maxJSONDepth {
			return nil, errors.New("JSON nested too deep")
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		n := &jnode{line: lineAt(dec.InputOffset() - 1)}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				n.kind = 'o'
				for dec.More() {
					kt, err := dec.Token()
					if err != nil {
						return nil, err
					}
					k, ok := kt.(string)
					if !ok {
						return nil, errors.New("JSON object key is not a string")
					}
					val, err := read(depth + 1)
					if err != nil {
						return nil, err
					}
					n.keys = append(n.keys, k)
					n.vals = append(n.vals, val)
				}
			case '[':
				n.kind = 'a'
				for dec.More() {
					val, err := read(depth + 1)
					if err != nil {
						return nil, err
					}
					n.vals = append(n.vals, val)
				}
			default:
				return nil, fmt.Errorf("unexpected %v", v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
		case string:
			n.kind, n.str = 's', v
		case json.Number:
			n.kind, n.str = 'n', v.String()
		case bool:
			n.kind, n.b = 'b', v
		case nil:
			n.kind = 'z'
		}
		return n, nil
	}
	root, err := read(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	if root.kind != 'o' {
		return nil, errors.New("the JSON document is not an object")
	}
	return root, nil
}

// get returns the value of key in an object (nil when absent or n is no
// object).
func (n *jnode) get(key string) *jnode {
	if n == nil || n.kind != 'o' {
		return nil
	}
	for i := len(n.keys) - 1; i >= 0; i-- {
		if n.keys[i] == key {
			return n.vals[i]
		}
	}
	return nil
}

func (n *jnode) has(key string) bool { return n.get(key) != nil }

// s is a string value ("" for anything else; a number's text).
func (n *jnode) s(key string) string {
	v := n.get(key)
	if v == nil || (v.kind != 's' && v.kind != 'n') {
		return ""
	}
	return v.str
}

func (n *jnode) boolean(key string) bool {
	v := n.get(key)
	return v != nil && v.kind == 'b' && v.b
}

// int reads an integer value; ok is false when absent or not one.
func (n *jnode) int(key string) (int64, bool) {
	v := n.get(key)
	if v == nil || v.kind != 'n' {
		return 0, false
	}
	i, err := strconv.ParseInt(v.str, 10, 64)
	return i, err == nil
}

// list returns an array's elements (a single value counts as a list of
// one, as sing-box's listable fields take).
func (n *jnode) list(key string) []*jnode {
	v := n.get(key)
	switch {
	case v == nil || v.kind == 'z':
		return nil
	case v.kind == 'a':
		return v.vals
	}
	return []*jnode{v}
}

// strs returns a listable field's strings.
func (n *jnode) strs(key string) []string {
	var out []string
	for _, e := range n.list(key) {
		if e.kind == 's' || e.kind == 'n' {
			out = append(out, e.str)
		}
	}
	return out
}

func (n *jnode) lineOf(key string) int {
	if v := n.get(key); v != nil {
		return v.line
	}
	if n != nil {
		return n.line
	}
	return 0
}

// each calls f for every key of an object, in order.
func (n *jnode) each(f func(key string, v *jnode)) {
	if n == nil || n.kind != 'o' {
		return
	}
	for i, k := range n.keys {
		f(k, n.vals[i])
	}
}

// elems returns an array's elements (none for nil or another kind).
func (n *jnode) elems() []*jnode {
	if n == nil || n.kind != 'a' {
		return nil
	}
	return n.vals
}
