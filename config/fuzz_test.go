package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"switchyard/spec"
)

// FuzzParse checks that no input panics the loader, that a rejection is
// always Errors with located, worded problems, and that an accepted text
// lowers to the same spec every time.
func FuzzParse(f *testing.F) {
	f.Add(Default())
	if full, err := os.ReadFile(filepath.Join("testdata", "full.toml")); err == nil {
		f.Add(full)
	}
	f.Add([]byte("[[outbounds]]\ntag = \"d\"\ntype = \"freedom\"\n[[rules]]\nip_cidr = [\"10.0.0.0/8\"]\noutbound = \"d\"\n"))
	f.Add([]byte("inbounds = [{ tag = \"a\", type = \"socks\", listen = \"[::1]:1080\", users = [{ username = \"u\", password = \"p\" }] }]\n"))
	f.Add([]byte("[log]\nLevel = 1\n[[groups]]\n"))
	f.Add([]byte("[[balancers]]\ntag = \"pool\"\nmembers = [\"direct\", \"pool\"]\nstrategy = \"round_robin\"\nprobe_interval = \"10s\"\nprobe_timeout = \"1s\"\n[route]\nfinal = \"pool\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.toml")
		if err != nil {
			if s != nil {
				t.Fatal("a spec came back with an error")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, e := range errs {
				if e.Msg == "" || e.File != "fuzz.toml" || e.Line < 0 || e.Line > lines {
					t.Fatalf("bad problem %#v in a %d-line document", e, lines)
				}
			}
			return
		}
		again, err := Parse(data, "fuzz.toml")
		if err != nil || !spec.Equal(s, again) {
			t.Fatalf("two parses of one text differ: %v", err)
		}
	})
}
