package config

import (
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"
)

func TestIndexLines(t *testing.T) {
	doc := `# comment
log.level = "info"
[socket]
bind_address = [
  "192.0.2.1",

  "2001:db8::1",
]
[[inbounds]]
tag = "a"
users = [{ username = "u",
           password = "p" }, { username = "v" }]
[[inbounds]]
tag = "b"
[inbounds.extra]
deep = { list = [[1, 2], [3]] }
[[outbounds]]
"quoted.key" = 1
`
	ix := buildIndex([]byte(doc))
	for key, line := range map[string]int{
		"log":                               2,
		"log.level":                         2,
		"socket":                            3,
		"socket.bind_address":               4,
		"socket.bind_address[0]":            5,
		"socket.bind_address[1]":            7,
		"inbounds":                          9,
		"inbounds[0]":                       9,
		"inbounds[0].tag":                   10,
		"inbounds[0].users":                 11,
		"inbounds[0].users[0]":              11,
		"inbounds[0].users[0].username":     11,
		"inbounds[0].users[0].password":     12,
		"inbounds[0].users[1].username":     12,
		"inbounds[1]":                       13,
		"inbounds[1].tag":                   14,
		"inbounds[1].extra":                 15,
		"inbounds[1].extra.deep.list":       16,
		"inbounds[1].extra.deep.list[0][1]": 16,
		"outbounds[0]":                      17,
		`outbounds[0]."quoted.key"`:         18,
		// Not written: the closest written parent answers.
		"inbounds[1].listen":            13,
		"inbounds[0].users[1].password": 12,
	} {
		if got := ix.line(key); got != line {
			t.Errorf("line(%q) = %d, want %d", key, got, line)
		}
	}
	if got := ix.line("rules[0].outbound"); got != 0 {
		t.Errorf("a key with nothing written on its way has line %d, want 0", got)
	}
	if p, ok := locate([]byte(doc), &lineTable{data: []byte(doc)}, position{line: 12, col: 30}, nil); !ok || p.String() != "inbounds[0].users[1]" {
		t.Errorf("at 12:30 = %v, %v; want the second users table", p, ok)
	}
	// An index for some keys holds those and their parents only.
	some := indexKeys([]byte(doc), []string{"inbounds[0].users[1].password", "outbounds[0].tag"})
	if got := len(some.lines); got != 6 {
		t.Errorf("an index of two keys holds %d lines: %v", got, some.lines)
	}
	if got := some.line("inbounds[0].users[1].password"); got != 12 {
		t.Errorf("line of a wanted key = %d, want 12", got)
	}
}

// depths records the deepest path a walk visits.
type depths struct{ max int }

func (d *depths) key(p keyPath, _ int, _ bool)             { d.max = max(d.max, len(p)) }
func (d *depths) implicit(p keyPath, _ int)                { d.max = max(d.max, len(p)) }
func (d *depths) value(p keyPath, _ *unstable.Node, _ int) { d.max = max(d.max, len(p)) }

func TestIndexStopsAtSyntaxError(t *testing.T) {
	ix := buildIndex([]byte("a = 1\nb = \nc = 3\n"))
	if ix.line("a") != 1 || ix.line("c") != 0 {
		t.Fatalf("lines: a=%d c=%d", ix.line("a"), ix.line("c"))
	}
}

// Deep documents must not cost time quadratic in their depth: indexing a
// path copies it, so the index stops at maxIndexDepth.
func TestIndexDeepDocuments(t *testing.T) {
	const n = 9000
	for name, doc := range map[string]string{
		"nested arrays": "a = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n",
		"nested tables": "a = " + strings.Repeat("{b=", n) + "1" + strings.Repeat("}", n) + "\n",
		"dotted key":    strings.Repeat("a.", n) + "b = 1\n",
		"dotted header": "[" + strings.Repeat("a.", n) + "b]\nc = 1\n",
	} {
		start := time.Now()
		var d depths
		walk([]byte(doc), &d)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: indexing took %v", name, d)
		}
		if d.max > maxIndexDepth+1 {
			t.Fatalf("%s: walked a path of depth %d", name, d.max)
		}
		_, _, err := Parse([]byte(doc), "deep.toml")
		if err == nil || !strings.HasPrefix(err.Error(), "deep.toml:1: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
