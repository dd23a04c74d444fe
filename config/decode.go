package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
	"switchyard/internal/clip"
)

// decode decodes data into f. Unknown keys do not stop the decoder: it
// skips them, and unknownKeys finds them in a walk of its own. A syntax or
// type error stops it: fatal is then the only problem worth reporting,
// since f is incomplete.
//
// The decoder's own strict mode is not used: it locates each unknown key
// by counting lines from the start of the file, which for a file of many
// rules that each have one costs the size of the file per key.
func decode(data []byte, f *fileConfig, tab *lineTable) (fatal *Error) {
	err := toml.NewDecoder(bytes.NewReader(data)).Decode(f)
	var de *toml.DecodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return decodeProblem(de, data, tab)
	default:
		return &Error{Msg: clip.String(err.Error())}
	}
}

var cannotDecode = regexp.MustCompile(`^cannot decode TOML ([a-z ]+?) into `)

// decodeProblem turns a syntax or type error into a problem naming the key
// and what it should hold, without the Go type names of the decoder's text.
func decodeProblem(e *toml.DecodeError, data []byte, tab *lineTable) *Error {
	line, col := e.Position()
	msg := strings.TrimPrefix(e.Error(), "toml: ")
	m := cannotDecode.FindStringSubmatch(msg)
	if m == nil {
		key := strings.Join(e.Key(), ".")
		if p, ok := locate(data, tab, position{line, col}, e.Key()); ok {
			key = p.String()
		}
		return &Error{Line: line, Key: key, Msg: clip.String(msg)}
	}
	// A value of the wrong type: the first one in the document is the one
	// the decoder stopped at, and the walk knows its full path and line.
	tc := &typeCheck{}
	walk(data, tc)
	if tc.p != nil && namesPrefix(e.Key(), tc.p) {
		found := article(kindName(tc.kind))
		e := &Error{Line: tab.line(tc.off), Key: tc.p.String(), Msg: "wrong type: found " + found}
		if e.Line == 0 {
			e.Line = line
		}
		if want := describe(tc.t); want != "" {
			e.Msg = fmt.Sprintf("expected %s, found %s", want, found)
		}
		return e
	}
	key := strings.Join(e.Key(), ".")
	p, ok := locate(data, tab, position{line, col}, e.Key())
	if ok {
		key = p.String()
	}
	msg = "wrong type: found " + article(m[1])
	if ok {
		if want := describe(schemaType(p)); want != "" {
			msg = fmt.Sprintf("expected %s, found %s", want, article(m[1]))
		}
	}
	return &Error{Line: line, Key: key, Msg: msg}
}

// locate finds the path of the key or value an error points at: by its exact
// position, else by its key among the keys written on its line.
func locate(data []byte, tab *lineTable, at position, names []string) (keyPath, bool) {
	l := &locator{tab: tab, at: at, names: names}
	walk(data, l)
	if l.exact != nil {
		return l.exact, true
	}
	return l.onLine, l.onLine != nil
}

// locator is the pass behind locate.
type locator struct {
	tab           *lineTable
	at            position
	names         []string
	exact, onLine keyPath
}

func (l *locator) key(p keyPath, off int, _ bool) {
	pos := l.tab.pos(off)
	if l.exact == nil && pos == l.at {
		l.exact = p.clone()
	}
	if l.onLine == nil && len(l.names) > 0 && pos.line == l.at.line && sameNames(p, l.names) {
		l.onLine = p.clone()
	}
}

func (l *locator) implicit(keyPath, int) {}

func (l *locator) value(p keyPath, _ *unstable.Node, off int) {
	if off >= 0 && l.exact == nil && l.tab.pos(off) == l.at {
		l.exact = p.clone()
	}
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

// namesPrefix reports whether names is p's key names, array indexes left
// out, or the start of them.
func namesPrefix(names []string, p keyPath) bool {
	i := 0
	for _, part := range p {
		if i == len(names) {
			break
		}
		if part.isIndex {
			continue
		}
		if names[i] != part.name {
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
