package provider

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden converts every input in testdata and compares the nodes and
// the skipped nodes with the .golden.json beside it.
func TestGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/*")
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.json") {
			continue
		}
		n++
		t.Run(filepath.Base(in), func(t *testing.T) {
			content, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			nodes, skipped, err := Parse(content)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(struct {
				Nodes   []Node
				Skipped []Skipped
			}{nodes, skipped}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := in + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s:\n%s", in, golden, got)
			}
		})
	}
	if n < 5 {
		t.Fatalf("only %d inputs in testdata", n)
	}
}
