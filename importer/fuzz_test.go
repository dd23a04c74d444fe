package importer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

// FuzzConvert feeds Convert arbitrary bytes, seeded with the golden
// inputs: it never panics or hangs, and what it returns as converted is
// always TOML.
func FuzzConvert(f *testing.F) {
	for _, name := range goldens {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("proxies:\n  - {name: a, type: ss, server: '::1', port: 1, cipher: aes-128-gcm, password: x}\nrules: [MATCH,a]\n"))
	f.Add([]byte(`{"outbounds": [{"type": "selector", "tag": "s", "outbounds": ["s"]}], /* c */ "route": {"rules": [{"port_range": ":"}]}}`))
	f.Add([]byte("a: &x [*x]\nproxies: *x\n"))
	f.Add([]byte("rules:\n  - AND,((NETWORK,UDP),(DST-PORT,443)),REJECT\n  - OR,((DOMAIN,a),(AND,((DOMAIN,b)))),DIRECT\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var (
			out      []byte
			problems []Problem
			err      error
		)
		done := make(chan struct{})
		go func() { defer close(done); out, problems, err = Convert(in, "fuzz") }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("Convert hangs:\n%s", buf[:runtime.Stack(buf, true)])
		}
		if err != nil {
			if out != nil || problems != nil {
				t.Fatal("an error with output")
			}
			return
		}
		var doc map[string]any
		if err := toml.Unmarshal(out, &doc); err != nil {
			t.Fatalf("the output is not TOML: %v\n%s", err, out)
		}
	})
}
