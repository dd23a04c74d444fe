package ruleset

import (
	"fmt"
	"strconv"
)

// Error is a rule set that does not load: the file, and the line (or, in a
// binary file, the byte offset) of the problem.
type Error struct {
	Path   string
	Line   int   // 0: not a line problem
	Offset int64 // binary formats; -1 when not known
	Msg    string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0:
		return e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	case e.Offset >= 0:
		return e.Path + ": at byte " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

// lineError is a parser's error before the path is known.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return "line " + strconv.Itoa(e.line) + ": " + e.msg }

func errAt(line int, format string, args ...any) error {
	return &lineError{line: line, msg: fmt.Sprintf(format, args...)}
}
