package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"switchyard/internal/clip"
)

// The schema is the file structs themselves: these helpers read their toml
// tags to say what a key should hold and to refuse keys that only match a
// field when case is ignored (the decoder folds case; TOML keys are
// case-sensitive).

var fileType = reflect.TypeFor[fileConfig]()

// structFields is the toml tags of one file struct: the field of each tag,
// and of each tag folded to lower case.
type structFields struct {
	exact  map[string]reflect.Type
	folded map[string]string // lower-case tag -> tag
}

// schemaFields holds every file struct reachable from fileConfig, read once:
// checking a key is then a map lookup, however many keys a file has.
var schemaFields = readSchema(fileType, map[reflect.Type]*structFields{})

func readSchema(t reflect.Type, seen map[reflect.Type]*structFields) map[reflect.Type]*structFields {
	t = deref(t)
	switch t.Kind() {
	case reflect.Slice, reflect.Map:
		return readSchema(t.Elem(), seen)
	case reflect.Struct:
	default:
		return seen
	}
	if _, ok := seen[t]; ok {
		return seen
	}
	sf := &structFields{exact: map[string]reflect.Type{}, folded: map[string]string{}}
	seen[t] = sf
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		sf.exact[tag] = f.Type
		if _, ok := sf.folded[strings.ToLower(tag)]; !ok {
			sf.folded[strings.ToLower(tag)] = tag
		}
		readSchema(f.Type, seen)
	}
	return seen
}

// schemaType returns the Go type that holds the value at p, or nil when p is
// not in the schema. Array indexes step into slice elements, and any key
// into the values of a map (a table of free keys, such as ws headers).
func schemaType(p keyPath) reflect.Type {
	t := fileType
	for _, part := range p {
		if t = step(t, part); t == nil {
			return nil
		}
	}
	return t
}

// step is the type one part below t: a slice element, a map value, or the
// field an exact key names; nil when there is none.
func step(t reflect.Type, part pathPart) reflect.Type {
	t = deref(t)
	switch {
	case part.isIndex:
		if t.Kind() != reflect.Slice {
			return nil
		}
		return t.Elem()
	case t.Kind() == reflect.Map:
		return t.Elem()
	}
	f, _ := field(t, part.name)
	return f
}

// field finds the type of the struct field tagged name, and says whether
// the tag is exactly name. When only a case-insensitive match exists it
// returns nil and that tag.
func field(t reflect.Type, name string) (f reflect.Type, tag string) {
	sf := schemaFields[t]
	if sf == nil {
		return nil, ""
	}
	if f, ok := sf.exact[name]; ok {
		return f, name
	}
	return nil, sf.folded[strings.ToLower(name)]
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// describe says in TOML words what a value of type t is ("a list of
// strings"); "" when t is nil.
func describe(t reflect.Type) string {
	if t == nil {
		return ""
	}
	t = deref(t)
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Uint32:
		return "an integer"
	case reflect.Struct:
		return "a table"
	case reflect.Map:
		if deref(t.Elem()).Kind() == reflect.String {
			return "a table of strings"
		}
	case reflect.Slice:
		switch deref(t.Elem()).Kind() {
		case reflect.String:
			return "a list of strings"
		case reflect.Int64:
			return "a list of integers"
		case reflect.Struct:
			return "a list of tables"
		}
	}
	return ""
}

// keyCheck is the pass that finds the keys the schema does not have: an
// unknown key, or one the decoder accepted only by folding case (TOML keys
// are case-sensitive). The decoder ignores unknown keys; this pass reports
// each one once, by its full path, at the line it is written.
type keyCheck struct {
	tab  *lineTable
	seen map[string]bool
	errs []*Error
}

func (c *keyCheck) key(p keyPath, off int, _ bool) {
	t := fileType
	for i, part := range p {
		next := step(t, part)
		if next != nil {
			t = next
			continue
		}
		if part.isIndex || deref(t).Kind() != reflect.Struct {
			return // a value of the wrong type: the decoder reports it
		}
		j := i + 1
		for j < len(p) && p[j].isIndex {
			j++ // an element of an unknown array of tables is named with its index
		}
		k := p[:j].String()
		if c.seen[k] {
			return
		}
		c.seen[k] = true
		msg := fmt.Sprintf("unknown key %q", clip.Value(part.name))
		if _, tag := field(deref(t), part.name); tag != "" {
			msg = fmt.Sprintf("unknown key %q (keys are case-sensitive: did you mean %q?)", clip.Value(part.name), tag)
		}
		c.errs = append(c.errs, &Error{Line: c.tab.line(off), Key: k, Msg: msg})
		return
	}
}

func (c *keyCheck) implicit(keyPath, int)              {}
func (c *keyCheck) value(keyPath, *unstable.Node, int) {}

// unknownKeys walks data for keys the schema does not have.
func unknownKeys(data []byte, tab *lineTable) []*Error {
	c := &keyCheck{tab: tab, seen: map[string]bool{}}
	walk(data, c)
	return c.errs
}

// typeCheck is the pass that finds the first value whose kind the schema
// does not take at its place, after the decoder refused one: the decoder
// names neither the array elements on the way nor, for an array or an
// inline table, where it is written.
type typeCheck struct {
	p    keyPath
	kind unstable.Kind
	off  int
	t    reflect.Type
}

func (c *typeCheck) key(keyPath, int, bool) {}
func (c *typeCheck) implicit(keyPath, int)  {}

func (c *typeCheck) value(p keyPath, v *unstable.Node, off int) {
	if c.p != nil {
		return
	}
	t := schemaType(p)
	if t == nil || takes(t, v.Kind) {
		return
	}
	c.p, c.kind, c.off, c.t = p.clone(), v.Kind, off, t
}

// takes reports whether a value of kind decodes into t.
func takes(t reflect.Type, kind unstable.Kind) bool {
	switch k := deref(t).Kind(); kind {
	case unstable.String:
		return k == reflect.String
	case unstable.Bool:
		return k == reflect.Bool
	case unstable.Integer:
		return k >= reflect.Int && k <= reflect.Uint64
	case unstable.Float:
		return k == reflect.Float32 || k == reflect.Float64
	case unstable.Array:
		return k == reflect.Slice
	case unstable.InlineTable:
		return k == reflect.Struct || k == reflect.Map
	}
	return false
}

// kindName says what a value of kind is, in the decoder's words.
func kindName(kind unstable.Kind) string {
	switch kind {
	case unstable.String:
		return "string"
	case unstable.Bool:
		return "boolean"
	case unstable.Integer:
		return "integer"
	case unstable.Float:
		return "float"
	case unstable.Array:
		return "array"
	case unstable.InlineTable:
		return "inline table"
	case unstable.LocalDate:
		return "local date"
	case unstable.LocalTime:
		return "local time"
	case unstable.LocalDateTime:
		return "local datetime"
	case unstable.DateTime:
		return "datetime"
	}
	return ""
}

// writtenKeys returns the keys of the table v (a pointer to a file struct)
// that were written: its pointer, slice, map and interface fields that are
// set, in field order.
func writtenKeys(v any) []string {
	rv := reflect.ValueOf(v).Elem()
	var out []string
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			if !f.IsNil() {
				out = append(out, rv.Type().Field(i).Tag.Get("toml"))
			}
		}
	}
	return out
}
