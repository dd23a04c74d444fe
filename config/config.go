// Package config reads switchyard's TOML configuration and lowers it into a
// spec.Spec. Decoding is strict: an unknown key is an error. Every problem
// names its key and line, and one pass reports as many as it can find.
//
// The file format is documented in CONFIG.md. Only the sections something
// implements are accepted; any other table or key is an unknown key.
package config

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"switchyard/internal/clip"
	"switchyard/spec"
)

//go:embed default.toml
var defaultText []byte

// Default returns the embedded default configuration text: one mixed
// inbound "mixed-in" on 127.0.0.1:7890 with UDP, and direct as the final
// outbound.
func Default() []byte { return bytes.Clone(defaultText) }

// Load reads and lowers the file at path; problems name the file by path.
// Relative paths inside the file are relative to its folder, and the state
// file is switchyard.db there unless [state] says otherwise. A file that
// cannot be read is an error from the file system, not Errors. Warnings
// come with a spec: they are what the file asks for that has no effect.
func Load(path string) (*spec.Spec, Warnings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, path, filepath.Dir(path))
}

// Parse lowers TOML data. name is the file name used in error texts; it is
// not read, and relative paths inside data are relative to the process's
// working directory. Since the text is no file to keep a state file beside,
// its state is kept in memory unless [state] names a file. Any problem
// makes it return nil and Errors (every problem found, in line order);
// otherwise the spec comes with its Warnings, if any.
func Parse(data []byte, name string) (*spec.Spec, Warnings, error) {
	return parse(data, name, "")
}

// ParseIn lowers TOML data as the file name in folder dir would be:
// relative paths inside it are relative to dir, and the state file is
// switchyard.db there unless [state] says otherwise; dir "" is Parse. It
// lets a caller that keeps the bytes it applied lower them again (a
// download applied over the running configuration).
func ParseIn(data []byte, name, dir string) (*spec.Spec, Warnings, error) {
	return parse(data, name, dir)
}

// parse lowers data; relative paths inside it are relative to dir ("" for
// text from no file: see lowerer.dir).
func parse(data []byte, name, dir string) (*spec.Spec, Warnings, error) {
	tab := &lineTable{data: data}
	var f fileConfig
	if fatal := decode(data, &f, tab); fatal != nil {
		fatal.File = name
		fatal.Key = clip.String(fatal.Key)
		return nil, nil, Errors{fatal}
	}
	l := newLowerer(dir)
	s := l.lower(&f) // the decoded file is not used after this

	var errs Errors
	for _, e := range unknownKeys(data, tab) {
		if !l.isRefused(e.Key) {
			errs = append(errs, e)
		}
	}
	errs = append(errs, l.errs...)
	if len(errs) == 0 {
		if len(l.warns) == 0 {
			return s, nil, nil
		}
		l.placeLines(data, l.warns)
		settle(l.warns, name)
		return s, Warnings(l.warns), nil
	}
	l.placeLines(data, errs)
	settle(errs, name)
	return nil, nil, errs
}

// settle names the file of each problem, clips its key and puts the
// problems in line order.
func settle(es []*Error, name string) {
	for _, e := range es {
		e.File = name
		e.Key = clip.String(e.Key)
	}
	sortByLine(es)
}
