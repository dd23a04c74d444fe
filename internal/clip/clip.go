// Package clip shortens text that came from outside — a value in a
// configuration file, bytes read from the network — before an error or a
// log line repeats it: a long one is cut to its first Max bytes and its
// length noted, so that one bad 50 MB value makes a line of a few hundred
// bytes, not a copy of the value.
package clip

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a long text are kept.
const Max = 200

// cut returns the first Max bytes of s, ending at a rune boundary, and
// whether it cut anything.
func cut(s string) (string, bool) {
	if len(s) <= Max {
		return s, false
	}
	i := Max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

func note(n int) string { return " (" + strconv.Itoa(n) + " bytes)" }

// String returns s, or when it is longer than Max its start followed by
// "…" and its length: `aaaa… (52428800 bytes)`.
func String(s string) string {
	head, cut := cut(s)
	if !cut {
		return s
	}
	return head + "…" + note(len(s))
}

// Quote returns s quoted as strconv.Quote does, or when it is longer than
// Max its start quoted and its length: `"aaaa…" (52428800 bytes)`.
func Quote(s string) string {
	head, cut := cut(s)
	if !cut {
		return strconv.Quote(s)
	}
	return strconv.Quote(head+"…") + note(len(s))
}

// Bytes is String for bytes; it copies only what it keeps.
func Bytes(b []byte) string {
	if len(b) <= Max {
		return string(b)
	}
	head, _ := cut(string(b[:Max+1]))
	return head + "…" + note(len(b))
}

// Value formats as its text clipped: %q as Quote, any other verb as
// String. Wrapping an argument in Value clips it wherever a format string
// puts it.
type Value string

// Format implements fmt.Formatter.
func (v Value) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		f.Write([]byte(Quote(string(v))))
		return
	}
	f.Write([]byte(String(string(v))))
}
