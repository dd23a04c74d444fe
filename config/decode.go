package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// decode decodes data strictly into f. Unknown keys do not stop the decoder:
// they come back in unknown, and f is filled with everything else. A syntax
// or type error stops it: fatal is then the only problem worth reporting,
// since f is incomplete.
func decode(data []byte, f *fileConfig, ix *index) (unknown []*Error, fatal *Error) {
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	err := d.Decode(f)
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
	case errors.As(err, &strict):
		for i := range strict.Errors {
			unknown = append(unknown, unknownKey(&strict.Errors[i], ix))
		}
	case errors.As(err, &de):
		return nil, decodeProblem(de, ix)
	default:
		return nil, &Error{Msg: err.Error()}
	}
	return append(unknown, caseMismatches(ix)...), nil
}

// unknownKey names an unknown key by its full path, array indexes included;
// the decoder's own key path leaves them out.
func unknownKey(e *toml.DecodeError, ix *index) *Error {
	line, col := e.Position()
	name := ""
	if k := e.Key(); len(k) > 0 {
		name = k[len(k)-1]
	}
	key := strings.Join(e.Key(), ".")
	if p, ok := ix.at[position{line, col}]; ok {
		key = p.String()
		if name == "" {
			name = p.last()
		}
	}
	return &Error{Line: line, Key: key, Msg: fmt.Sprintf("unknown key %q", name)}
}

var cannotDecode = regexp.MustCompile(`^cannot decode TOML ([a-z ]+?) into `)

// decodeProblem turns a syntax or type error into a problem naming the key
// and what it should hold, without the Go type names of the decoder's text.
func decodeProblem(e *toml.DecodeError, ix *index) *Error {
	line, _ := e.Position()
	msg := strings.TrimPrefix(e.Error(), "toml: ")
	p, ok := ix.locate(e)
	key := strings.Join(e.Key(), ".")
	if ok {
		key = p.String()
	}
	if m := cannotDecode.FindStringSubmatch(msg); m != nil {
		msg = "wrong type: found " + article(m[1])
		if ok {
			if want := describe(schemaType(p)); want != "" {
				msg = fmt.Sprintf("expected %s, found %s", want, article(m[1]))
			}
		}
	}
	return &Error{Line: line, Key: key, Msg: msg}
}

// locate finds the path of the key or value an error points at: by its exact
// position, else by its key among the keys written on its line.
func (ix *index) locate(e *toml.DecodeError) (keyPath, bool) {
	line, col := e.Position()
	if p, ok := ix.at[position{line, col}]; ok {
		return p, true
	}
	want := e.Key()
	if len(want) == 0 {
		return nil, false
	}
	for _, p := range ix.keys {
		if ix.lines[p.String()] == line && sameNames(p, want) {
			return p, true
		}
	}
	return nil, false
}

// sameNames reports whether p, without its array indexes, is names.
func sameNames(p keyPath, names []string) bool {
	i := 0
	for _, part := range p {
		if part.isIndex {
			continue
		}
		if i >= len(names) || names[i] != part.name {
			return false
		}
		i++
	}
	return i == len(names)
}

func article(kind string) string {
	if kind == "" {
		return "a value"
	}
	switch kind[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + kind
	}
	return "a " + kind
}
