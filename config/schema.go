package config

import (
	"fmt"
	"reflect"
	"strings"
)

// The schema is the file structs themselves: these helpers read their toml
// tags to say what a key should hold and to refuse keys that only match a
// field when case is ignored (the decoder folds case; TOML keys are
// case-sensitive).

var fileType = reflect.TypeFor[fileConfig]()

// schemaType returns the Go type that holds the value at p, or nil when p is
// not in the schema. Array indexes step into slice elements, and any key
// into the values of a map (a table of free keys, such as ws headers).
func schemaType(p keyPath) reflect.Type {
	t := fileType
	for _, part := range p {
		t = deref(t)
		if part.isIndex {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
			continue
		}
		if t.Kind() == reflect.Map {
			t = t.Elem()
			continue
		}
		f, exact := field(t, part.name)
		if f == nil || !exact {
			return nil
		}
		t = f.Type
	}
	return t
}

// field finds the struct field tagged name; exact is false when only a
// case-insensitive match exists.
func field(t reflect.Type, name string) (f *reflect.StructField, exact bool) {
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	var folded *reflect.StructField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("toml")
		if tag == name {
			return &sf, true
		}
		if folded == nil && strings.EqualFold(tag, name) {
			folded = &sf
		}
	}
	return folded, false
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

// caseMismatches reports every written key that the decoder accepted only
// by folding case, as an unknown key naming the spelling it resembles.
func caseMismatches(ix *index) []*Error {
	var out []*Error
	seen := map[string]bool{}
	for _, p := range ix.keys {
		t := fileType
		for i, part := range p {
			t = deref(t)
			if part.isIndex {
				if t.Kind() != reflect.Slice {
					break
				}
				t = t.Elem()
				continue
			}
			f, exact := field(t, part.name)
			if f == nil {
				break // unknown: the decoder reports it
			}
			if !exact {
				k := p[:i+1].String()
				if !seen[k] {
					seen[k] = true
					out = append(out, &Error{
						Line: ix.line(k),
						Key:  k,
						Msg:  fmt.Sprintf("unknown key %q (keys are case-sensitive: did you mean %q?)", part.name, f.Tag.Get("toml")),
					})
				}
				break
			}
			t = f.Type
		}
	}
	return out
}

// writtenKeys returns the keys of the table v (a pointer to a file struct)
// that were written: its pointer, slice and map fields that are set, in
// field order.
func writtenKeys(v any) []string {
	rv := reflect.ValueOf(v).Elem()
	var out []string
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			if !f.IsNil() {
				out = append(out, rv.Type().Field(i).Tag.Get("toml"))
			}
		}
	}
	return out
}
