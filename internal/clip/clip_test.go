package clip

import (
	"fmt"
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("a", 52428800)
	cutA := strings.Repeat("a", Max)
	for _, tc := range []struct{ name, got, want string }{
		{"short string", String("abc"), "abc"},
		{"short quote", Quote("a\"b"), `"a\"b"`},
		{"exactly Max", String(cutA), cutA},
		{"long string", String(long), cutA + "… (52428800 bytes)"},
		{"long quote", Quote(long), `"` + cutA + `…" (52428800 bytes)`},
		{"long bytes", Bytes([]byte(long)), cutA + "… (52428800 bytes)"},
		{"short bytes", Bytes([]byte("GET / HTTP/1.1")), "GET / HTTP/1.1"},
		// A cut never splits a rune: 199 bytes of 'a', then 'é' (2 bytes).
		{"rune boundary", String(strings.Repeat("a", Max-1) + "é" + long[:10]), strings.Repeat("a", Max-1) + "… (211 bytes)"},
		{"value %q", fmt.Sprintf("bad %q here", Value(long)), `bad "` + cutA + `…" (52428800 bytes) here`},
		{"value %s", fmt.Sprintf("bad %s", Value(long)), "bad " + cutA + "… (52428800 bytes)"},
		{"short value %q", fmt.Sprintf("%q", Value("x")), `"x"`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %.300q (%d bytes), want %.300q", tc.name, tc.got, len(tc.got), tc.want)
		}
	}
}
