package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a configuration file.
type Error struct {
	File string // the name given to Parse, or the path given to Load
	Line int    // 1-based; 0 when unknown
	Key  string // key path such as "outbounds[1].type"; "" when no key applies
	Msg  string
}

// Error formats the problem as "<file>:<line>: <key>: <msg>". An unknown line
// (0) is left out, and so is an empty key.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in line order.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As reach each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Warnings are the problems of a file that do not stop it from loading: keys
// it accepts that have no effect where they are written. Each is worded and
// placed as an Error is.
type Warnings []*Error

// sortByLine orders problems by line, keeping the order they were found in
// within one line. Problems with no line go last.
func sortByLine(es []*Error) {
	rank := func(e *Error) int {
		if e.Line <= 0 {
			return int(^uint(0) >> 1)
		}
		return e.Line
	}
	slices.SortStableFunc(es, func(a, b *Error) int { return cmp.Compare(rank(a), rank(b)) })
}
