package config

import (
	"sort"

	"github.com/pelletier/go-toml/v2/unstable"
)

// A walk reads the document once with the unstable parser and tells a
// visitor the path of every table header, key and value, and where each is
// written. It keeps nothing per key: what a pass needs (the lines of some
// keys, the unknown keys, the first value of the wrong type) is the
// visitor's to keep, so that a pass over a file of a million rules costs
// the parse and little more.
type visitor interface {
	// key is a table header (header set) or a key written at byte offset
	// off; p is its full path, array indexes included.
	key(p keyPath, off int, header bool)
	// implicit is a table a header or a dotted key defines on the way to
	// its last part, at the offset of the header or key.
	implicit(p keyPath, off int)
	// value is a value written at p; off is where it starts, or -1 when
	// that is not known.
	value(p keyPath, v *unstable.Node, off int)
}

// The paths a visitor sees share their storage with the walk: a visitor
// that keeps one keeps a clone.

// maxIndexDepth bounds the paths a walk builds. The schema is a few levels
// deep: a longer key is cut to its first maxIndexDepth parts (enough to see
// that it is unknown), and values deeper than that are not visited, since
// building their paths would cost time quadratic in the depth.
const maxIndexDepth = 16

// maxInterned bounds the key names one walk shares between paths.
const maxInterned = 4096

type walker struct {
	data   []byte
	v      visitor
	arrays map[string]*int   // array-of-tables path -> number of elements so far
	names  map[string]string // key names seen, to share one string per name
	buf    []byte            // scratch for path strings
	parts  []string          // scratch for the parts of a key
}

// walk visits every header, key and value of data in document order. A
// syntax error stops it: what was read before it was visited.
func walk(data []byte, v visitor) {
	w := &walker{data: data, v: v, arrays: map[string]*int{}, names: map[string]string{}}
	var p unstable.Parser
	p.Reset(data)
	var table keyPath
	inTable := true // key-values below the current header are visited
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			names, off := w.keyNames(n, maxIndexDepth)
			if names == nil {
				inTable = false
				continue
			}
			table = w.resolve(names, off, n.Kind == unstable.ArrayTable)
			inTable = len(table) < maxIndexDepth
			w.v.key(table, off, true)
		case unstable.KeyValue:
			if inTable {
				w.keyValue(table, n)
			}
		}
	}
}

// keyNames returns the parts of the key of a header or key-value, at most
// room of them, and the offset of its first part; nil when it has none or
// there is no room.
func (w *walker) keyNames(n *unstable.Node, room int) ([]string, int) {
	if room <= 0 {
		return nil, 0
	}
	names := w.parts[:0]
	off := -1
	it := n.Key()
	for it.Next() {
		k := it.Node()
		if off < 0 {
			off = int(k.Raw.Offset)
		}
		if len(names) < room {
			names = append(names, w.intern(k.Data))
		}
	}
	w.parts = names
	if off < 0 {
		return nil, 0
	}
	return names, off
}

func (w *walker) intern(b []byte) string {
	if s, ok := w.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(w.names) < maxInterned {
		w.names[s] = s
	}
	return s
}

// resolve turns the dotted key of a table header into a path: a prefix that
// names an array of tables refers to its last element, as in TOML. An
// array-of-tables header adds an element to its array and names it.
func (w *walker) resolve(names []string, off int, arrayTable bool) keyPath {
	var p keyPath
	for i, name := range names {
		p = append(p, pathPart{name: name})
		last := i == len(names)-1
		if !last {
			if n := w.arrays[w.pathString(p)]; n != nil && *n > 0 {
				p = append(p, pathPart{index: *n - 1, isIndex: true})
			}
		}
		if !last || !arrayTable {
			w.v.implicit(p, off)
		}
	}
	if arrayTable {
		w.v.implicit(p, off)
		n := w.arrays[w.pathString(p)]
		if n == nil {
			n = new(int)
			w.arrays[p.String()] = n
		}
		p = append(p, pathPart{index: *n, isIndex: true})
		*n++
	}
	return p
}

// pathString writes p into the walk's scratch buffer; the result is valid
// until the next call (use it for map lookups only).
func (w *walker) pathString(p keyPath) string {
	w.buf = p.appendTo(w.buf[:0])
	return string(w.buf)
}

func (w *walker) keyValue(table keyPath, n *unstable.Node) {
	names, off := w.keyNames(n, maxIndexDepth-len(table))
	if names == nil {
		return
	}
	p := table[:len(table):len(table)] // appending never writes into the table's path
	for i, name := range names {
		p = append(p, pathPart{name: name})
		if i < len(names)-1 {
			w.v.implicit(p, off)
		}
	}
	w.v.key(p, off, false)
	if len(p) < maxIndexDepth {
		w.value(p, n.Value(), w.valueStart(n.Value(), w.afterEquals(n), 0))
	}
}

// afterEquals is the offset just past the '=' of a key-value, where its
// value may start; -1 when not found.
func (w *walker) afterEquals(n *unstable.Node) int {
	last := -1
	it := n.Key()
	for it.Next() {
		k := it.Node().Raw
		last = int(k.Offset + k.Length)
	}
	if last < 0 {
		return -1
	}
	for i := last; i < len(w.data); i++ {
		if w.data[i] == '=' {
			return i + 1
		}
	}
	return -1
}

// value visits a value written at p and, inside inline tables and arrays,
// every key and element.
func (w *walker) value(p keyPath, v *unstable.Node, off int) {
	if !v.Valid() {
		return
	}
	w.v.value(p, v, off)
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if kv := it.Node(); kv.Kind == unstable.KeyValue {
				w.keyValue(p, kv)
			}
		}
	case unstable.Array:
		if len(p) >= maxIndexDepth {
			return
		}
		after := -1 // where the next element may start, when known
		if off >= 0 {
			after = off + 1
		}
		it := v.Children()
		for i := 0; it.Next(); {
			e := it.Node()
			if e.Kind == unstable.Comment {
				after = int(e.Raw.Offset + e.Raw.Length)
				continue
			}
			start := w.valueStart(e, after, 0)
			if start < 0 {
				start = off // at least the array it is in
			}
			w.value(append(p[:len(p):len(p)], pathPart{index: i, isIndex: true}), e, start)
			after = -1
			if e.Kind != unstable.InlineTable && e.Kind != unstable.Array && e.Raw.Length > 0 {
				after = int(e.Raw.Offset + e.Raw.Length)
			}
			i++
		}
	}
}

// valueStart is the offset where v starts, or -1; after is where the
// search may start scanning forward (just past the previous element or the
// opening bracket), or -1. The parser keeps no range for an array: an array
// starts at the '[' before its first child (a value or a comment, with only
// white space between), found at most maxIndexDepth arrays down, or else
// at the first '[' after the previous element.
func (w *walker) valueStart(v *unstable.Node, after, depth int) int {
	if !v.Valid() {
		return -1
	}
	if v.Kind != unstable.Array {
		if v.Raw.Length > 0 {
			return int(v.Raw.Offset)
		}
		return -1
	}
	if depth < maxIndexDepth {
		if it := v.Children(); it.Next() {
			if first := w.valueStart(it.Node(), -1, depth+1); first > 0 {
				if i := w.skipBack(first - 1); i >= 0 && w.data[i] == '[' {
					return i
				}
			}
		}
	}
	if i := w.skipForward(after); i >= 0 && w.data[i] == '[' {
		return i
	}
	return -1
}

// skipBack returns the last offset at or before i that is not white space.
func (w *walker) skipBack(i int) int {
	for ; i >= 0; i-- {
		switch w.data[i] {
		case ' ', '\t', '\r', '\n':
		default:
			return i
		}
	}
	return -1
}

// skipForward returns the first offset at or after i that is not white
// space, a comma or a comment; -1 for none or when i is -1.
func (w *walker) skipForward(i int) int {
	if i < 0 {
		return -1
	}
	for ; i < len(w.data); i++ {
		switch w.data[i] {
		case ' ', '\t', '\r', '\n', ',':
		case '#':
			for i < len(w.data) && w.data[i] != '\n' {
				i++
			}
		default:
			return i
		}
	}
	return -1
}

// lineTable converts byte offsets into lines and columns. It is built on
// first use: a pass that finds nothing to report never needs it.
type lineTable struct {
	data   []byte
	starts []int // byte offset where each line starts
}

// pos converts a byte offset to a 1-based line and byte column.
func (t *lineTable) pos(offset int) position {
	if t.starts == nil {
		t.starts = []int{0}
		for i, c := range t.data {
			if c == '\n' {
				t.starts = append(t.starts, i+1)
			}
		}
	}
	i := sort.Search(len(t.starts), func(i int) bool { return t.starts[i] > offset }) - 1
	return position{line: i + 1, col: offset - t.starts[i] + 1}
}

// line is the line of a byte offset; 0 for -1.
func (t *lineTable) line(offset int) int {
	if offset < 0 {
		return 0
	}
	return t.pos(offset).line
}
