package config

import "github.com/pelletier/go-toml/v2/unstable"

// index maps keys of a document to the line where each is first written.
// The decoder gives positions only for its own errors; the checks that run
// after decoding (a bad address, a duplicate tag) find the line of the key
// they blame here. Lines are looked up after lowering, for the keys that
// problems name: an index built for a set of keys keeps only theirs, so a
// file of a million rules with one bad value costs one walk, not a map of
// every key in it.
type index struct {
	lines map[string]int // key path -> line of its first definition
	want  map[string]bool
	tab   *lineTable
	buf   []byte
}

// position is a 1-based line and byte column, as the decoder reports them.
type position struct{ line, col int }

// buildIndex indexes every key of data (the tests read whole documents).
func buildIndex(data []byte) *index { return indexKeys(data, nil) }

// indexKeys indexes the keys in want, and every one of their parents (a
// missing key is blamed on the closest parent written); nil wants all.
func indexKeys(data []byte, want []string) *index {
	ix := &index{lines: map[string]int{}, tab: &lineTable{data: data}}
	if want != nil {
		ix.want = map[string]bool{}
		for _, k := range want {
			for ; k != "" && !ix.want[k]; k = parentKey(k) {
				ix.want[k] = true
			}
		}
		if len(ix.want) == 0 {
			return ix
		}
	}
	walk(data, ix)
	return ix
}

// note records the line of p at off: the first one seen, or an earlier one
// when a key is written (a key may follow a header that defined it
// implicitly further down).
func (ix *index) note(p keyPath, off int, earliest bool) {
	if off < 0 {
		return
	}
	ix.buf = p.appendTo(ix.buf[:0])
	if ix.want != nil && !ix.want[string(ix.buf)] {
		return
	}
	line := ix.tab.line(off)
	if l, ok := ix.lines[string(ix.buf)]; ok && (!earliest || l <= line) {
		return
	}
	ix.lines[string(ix.buf)] = line
}

func (ix *index) key(p keyPath, off int, _ bool)             { ix.note(p, off, true) }
func (ix *index) implicit(p keyPath, off int)                { ix.note(p, off, false) }
func (ix *index) value(p keyPath, _ *unstable.Node, off int) { ix.note(p, off, false) }

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
