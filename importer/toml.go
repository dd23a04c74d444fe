package importer

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A table is one TOML table of the output: a [header] or [[header]] and its
// keys in the order they are written.
type table struct {
	header  string // "outbounds" for [[outbounds]] when array, "route" for [route]
	array   bool
	comment string // written on the line above the header
	kvs     []kv
}

type kv struct {
	key string
	val any
}

// set appends key = val (a later set of the same key replaces it in place).
func (t *table) set(key string, val any) {
	for i := range t.kvs {
		if t.kvs[i].key == key {
			t.kvs[i].val = val
			return
		}
	}
	t.kvs = append(t.kvs, kv{key, val})
}

func (t *table) get(key string) (any, bool) {
	for _, e := range t.kvs {
		if e.key == key {
			return e.val, true
		}
	}
	return nil, false
}

// inline is an inline table whose keys keep their order.
type inline []kv

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// writeKey writes a key bare when TOML allows it, else quoted.
func writeKey(b *bytes.Buffer, k string) {
	if bareKey.MatchString(k) {
		b.WriteString(k)
		return
	}
	writeString(b, k)
}

// writeString writes s as a TOML basic string. Invalid UTF-8 becomes
// U+FFFD: a TOML document is UTF-8.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// writeTo writes v as a TOML value into b.
func writeTo(b *strings.Builder, v any) {
	var buf bytes.Buffer
	writeValue(&buf, v)
	b.Write(buf.Bytes())
}

// writeValue writes a value: strings, integers, booleans, lists of them,
// and inline tables (a map's keys sorted, an inline's in order).
func writeValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case string:
		writeString(b, v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case uint16:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case []string:
		writeList(b, len(v), func(i int) { writeString(b, v[i]) })
	case []int64:
		writeList(b, len(v), func(i int) { b.WriteString(strconv.FormatInt(v[i], 10)) })
	case []any:
		writeList(b, len(v), func(i int) { writeValue(b, v[i]) })
	case []map[string]any:
		writeList(b, len(v), func(i int) { writeValue(b, v[i]) })
	case map[string]string:
		keys := sortedKeys(v)
		writeInline(b, len(keys), func(i int) { writeKey(b, keys[i]); b.WriteString(" = "); writeString(b, v[keys[i]]) })
	case map[string]any:
		keys := sortedKeys(v)
		writeInline(b, len(keys), func(i int) { writeKey(b, keys[i]); b.WriteString(" = "); writeValue(b, v[keys[i]]) })
	case inline:
		writeInline(b, len(v), func(i int) { writeKey(b, v[i].key); b.WriteString(" = "); writeValue(b, v[i].val) })
	default:
		// Every value the converters build is one of the above; anything
		// else is written as a string rather than producing invalid TOML.
		writeString(b, fmt.Sprint(v))
	}
}

func writeList(b *bytes.Buffer, n int, each func(int)) {
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		each(i)
	}
	b.WriteByte(']')
}

func writeInline(b *bytes.Buffer, n int, each func(int)) {
	if n == 0 {
		b.WriteString("{}")
		return
	}
	b.WriteString("{ ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		each(i)
	}
	b.WriteString(" }")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// render writes the tables in order, a blank line between them, under a
// comment heading.
func render(heading []string, ts []*table) []byte {
	var b bytes.Buffer
	for _, h := range heading {
		b.WriteString("# " + strings.ReplaceAll(h, "\n", " ") + "\n")
	}
	for _, t := range ts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if t.comment != "" {
			for _, line := range strings.Split(t.comment, "\n") {
				b.WriteString("# " + line + "\n")
			}
		}
		if t.header != "" {
			open, close := "[", "]"
			if t.array {
				open, close = "[[", "]]"
			}
			b.WriteString(open + t.header + close + "\n")
		}
		for _, e := range t.kvs {
			writeKey(&b, e.key)
			b.WriteString(" = ")
			writeValue(&b, e.val)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
