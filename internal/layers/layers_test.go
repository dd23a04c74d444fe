package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "switchyard"

// A rule holds for every package under scope: allowed reports whether that
// package may import imp.
type rule struct {
	scope   string // an import path; its sub-packages are in scope too
	what    string // the rule, as a violation names it
	allowed func(pkg, imp string) bool
}

var rules = []rule{
	{
		scope: module + "/protocol",
		what:  "a wire codec imports only the standard library, golang.org/x/crypto, golang.org/x/sys/cpu, lukechampine.com/blake3, switchyard/netx and other protocol packages",
		allowed: func(_, imp string) bool {
			return isStd(imp) ||
				under(imp, "golang.org/x/crypto") || imp == "golang.org/x/sys/cpu" ||
				imp == "lukechampine.com/blake3" ||
				imp == module+"/netx" || under(imp, module+"/protocol")
		},
	},
	{
		scope: module + "/transport",
		what:  "a transport imports no outbound, inbound, plane or supervisor",
		allowed: func(_, imp string) bool {
			return !under(imp, module+"/outbound") && !under(imp, module+"/inbound") &&
				!under(imp, module+"/plane") && !under(imp, module+"/supervisor")
		},
	},
	{
		scope: module,
		what:  "only the command imports the supervisor and the API",
		allowed: func(pkg, imp string) bool {
			if !under(imp, module+"/supervisor") && !under(imp, module+"/api") {
				return true
			}
			return under(pkg, module+"/cmd") || under(pkg, imp)
		},
	},
}

// under reports whether p is the import path root or one below it.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// isStd reports whether imp is a standard library package: its first
// element has no dot, and it is not this module's.
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".") && first != module
}

// violations lists pkg's imports that break a rule, as "pkg imports imp: rule".
func violations(pkg string, imports []string) []string {
	var out []string
	for _, r := range rules {
		if !under(pkg, r.scope) {
			continue
		}
		for _, imp := range imports {
			if !r.allowed(pkg, imp) {
				out = append(out, pkg+" imports "+imp+": "+r.what)
			}
		}
	}
	return out
}

// moduleImports parses every non-test Go file of the module (whatever its
// build constraints) and returns each package's imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(b), "module "+module+"\n") {
		t.Fatalf("%s is not the root of module %s: %v", root, module, err)
	}
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := path.Join(module, filepath.ToSlash(rel))
		for _, is := range f.Imports {
			imp, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if !slices.Contains(pkgs[pkg], imp) {
				pkgs[pkg] = append(pkgs[pkg], imp)
			}
		}
		if _, ok := pkgs[pkg]; !ok {
			pkgs[pkg] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// Every package of the module keeps to the layering rules.
func TestImportsKeepToTheLayers(t *testing.T) {
	pkgs := moduleImports(t)
	// The walk found the layers it checks, so the test cannot pass on an
	// empty tree.
	for _, want := range []string{module + "/protocol/socks5", module + "/transport", module + "/supervisor", module + "/cmd/switchyard"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("package %s not found among %d packages", want, len(pkgs))
		}
	}
	var bad []string
	for pkg, imports := range pkgs {
		bad = append(bad, violations(pkg, imports)...)
	}
	slices.Sort(bad)
	for _, v := range bad {
		t.Error(v)
	}
}

// The rules refuse the imports that cross a layer and accept the ones that
// do not.
func TestRules(t *testing.T) {
	tests := []struct {
		pkg, imp string
		ok       bool
	}{
		{"switchyard/protocol/socks5", "switchyard/outbound", false},
		{"switchyard/protocol/socks5", "net", true},
		{"switchyard/protocol/socks5", "switchyard/netx", true},
		{"switchyard/protocol/trojan", "switchyard/protocol/socks5", true},
		{"switchyard/protocol/vmess", "golang.org/x/crypto/chacha20poly1305", true},
		{"switchyard/protocol/vmess", "golang.org/x/sys/cpu", true},
		{"switchyard/protocol/vmess", "golang.org/x/net/http2", false},
		{"switchyard/protocol/shadowsocks", "lukechampine.com/blake3", true},
		{"switchyard/protocol/vless", "switchyard/transport", false},
		{"switchyard/protocol/vless", "github.com/gorilla/websocket", false},
		{"switchyard/transport", "switchyard/outbound", false},
		{"switchyard/transport", "switchyard/outbound/socks", false},
		{"switchyard/transport", "switchyard/inbound/socks", false},
		{"switchyard/transport", "switchyard/plane", false},
		{"switchyard/transport", "switchyard/supervisor", false},
		{"switchyard/transport", "switchyard/netx", true},
		{"switchyard/transport", "switchyard/spec", true},
		{"switchyard/outbound", "switchyard/supervisor", false},
		{"switchyard/inbound/socks", "switchyard/supervisor", false},
		{"switchyard/plane", "switchyard/api", false},
		{"switchyard/cmd/switchyard", "switchyard/supervisor", true},
		{"switchyard/cmd/switchyard", "switchyard/api", true},
		{"switchyard/outbound", "switchyard/transport", true},
	}
	for _, tt := range tests {
		got := violations(tt.pkg, []string{tt.imp})
		if ok := len(got) == 0; ok != tt.ok {
			t.Errorf("%s importing %s: allowed = %v, want %v (%v)", tt.pkg, tt.imp, ok, tt.ok, got)
		}
	}
}
