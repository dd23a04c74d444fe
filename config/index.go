package config

import (
	"sort"

	"github.com/pelletier/go-toml/v2/unstable"
)

// index maps the keys of a document to where they are written. The decoder
// gives positions only for its own errors; the checks that run after decoding
// (a bad address, a duplicate tag) find the line of the key they blame here.
type index struct {
	lines map[string]int       // key path -> line of its first definition
	at    map[position]keyPath // where a key or a value starts -> its key path
	keys  []keyPath            // every key and table header, in document order

	arrays     map[string]int // array-of-tables path -> number of elements so far
	lineStarts []int          // byte offset where each line starts
}

// position is a 1-based line and byte column, as the decoder reports them.
type position struct{ line, col int }

// maxIndexDepth bounds the paths the index records. The schema is a few
// levels deep; deeper keys are unknown anyway and are found by the decoder,
// and indexing them would cost time quadratic in the depth.
const maxIndexDepth = 16

// buildIndex walks the document with the unstable parser. Keys, table
// headers, array-of-tables entries, inline tables and array elements are all
// indexed. A syntax error stops the walk; what was read before it stays.
func buildIndex(data []byte) *index {
	ix := &index{
		lines:      map[string]int{},
		at:         map[position]keyPath{},
		arrays:     map[string]int{},
		lineStarts: []int{0},
	}
	for i, c := range data {
		if c == '\n' {
			ix.lineStarts = append(ix.lineStarts, i+1)
		}
	}
	var p unstable.Parser
	p.Reset(data)
	var table keyPath
	skip := false // the current table is too deep to index
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table:
			names, first := keyNames(n)
			if skip = first == nil || len(names) > maxIndexDepth; skip {
				continue
			}
			table = ix.resolve(names, ix.pos(first).line)
			ix.recordKey(table, first)
		case unstable.ArrayTable:
			names, first := keyNames(n)
			if skip = first == nil || len(names) > maxIndexDepth; skip {
				continue
			}
			base := ix.resolve(names, ix.pos(first).line)
			i := ix.arrays[base.String()]
			ix.arrays[base.String()] = i + 1
			table = base.elem(i)
			ix.recordKey(table, first)
		case unstable.KeyValue:
			if !skip {
				ix.keyValue(table, n)
			}
		}
	}
	return ix
}

// keyNames returns the parts of the key of a table header or key-value, and
// the node of its first part.
func keyNames(n *unstable.Node) (names []string, first *unstable.Node) {
	it := n.Key()
	for it.Next() {
		k := it.Node()
		if first == nil {
			first = k
		}
		names = append(names, string(k.Data))
	}
	return names, first
}

// resolve turns the dotted key of a table header into a path: a prefix that
// names an array of tables refers to its last element, as in TOML.
func (ix *index) resolve(names []string, line int) keyPath {
	var p keyPath
	for i, name := range names {
		p = p.key(name)
		if i < len(names)-1 {
			if n := ix.arrays[p.String()]; n > 0 {
				p = p.elem(n - 1)
			}
		}
		ix.noteLine(p, line)
	}
	return p
}

func (ix *index) keyValue(table keyPath, n *unstable.Node) {
	names, first := keyNames(n)
	if first == nil || len(table)+len(names) > maxIndexDepth {
		return
	}
	line := ix.pos(first).line
	p := table
	for _, name := range names {
		p = p.key(name)
		ix.noteLine(p, line)
	}
	ix.recordKey(p, first)
	ix.value(p, n.Value())
}

// value indexes a value written at p: where it starts, and inside inline
// tables and arrays, every key and element.
func (ix *index) value(p keyPath, v *unstable.Node) {
	if !v.Valid() {
		return
	}
	if v.Raw.Length > 0 {
		pos := ix.pos(v)
		ix.at[pos] = p
		ix.noteLine(p, pos.line)
	}
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if kv := it.Node(); kv.Kind == unstable.KeyValue {
				ix.keyValue(p, kv)
			}
		}
	case unstable.Array:
		if len(p) >= maxIndexDepth {
			return
		}
		it := v.Children()
		for i := 0; it.Next(); {
			if e := it.Node(); e.Kind != unstable.Comment {
				ix.value(p.elem(i), e)
				i++
			}
		}
	}
}

func (ix *index) recordKey(p keyPath, first *unstable.Node) {
	pos := ix.pos(first)
	s := p.String()
	ix.at[pos] = p
	if _, ok := ix.lines[s]; !ok || pos.line < ix.lines[s] {
		ix.lines[s] = pos.line
	}
	ix.keys = append(ix.keys, p)
}

// noteLine records the line of p unless p already has one. A line of 0 (an
// implicit table) is not recorded.
func (ix *index) noteLine(p keyPath, line int) {
	if line <= 0 {
		return
	}
	if _, ok := ix.lines[p.String()]; !ok {
		ix.lines[p.String()] = line
	}
}

func (ix *index) pos(n *unstable.Node) position {
	return ix.lineOf(int(n.Raw.Offset))
}

// lineOf converts a byte offset to a position.
func (ix *index) lineOf(offset int) position {
	i := sort.Search(len(ix.lineStarts), func(i int) bool { return ix.lineStarts[i] > offset }) - 1
	return position{line: i + 1, col: offset - ix.lineStarts[i] + 1}
}

// line returns the line of key k, or of its closest written parent when k
// itself is not written (a missing required key is blamed on its table).
// It returns 0 when nothing on the way is written.
func (ix *index) line(k string) int {
	for ; k != ""; k = parentKey(k) {
		if l, ok := ix.lines[k]; ok {
			return l
		}
	}
	return 0
}
