package config

import (
	"path/filepath"
	"strings"
	"testing"

	"switchyard/spec"
)

func TestAPITable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	tests := []struct {
		name string
		text string
		want *spec.API
	}{
		{"no table, no API", "", nil},
		{"an empty table listens on the default", "[api]\n", &spec.API{Listen: "127.0.0.1:9090"}},
		{"loopback without a secret", "[api]\nlisten = \"[::1]:9091\"\n", &spec.API{Listen: "[::1]:9091"}},
		{"localhost without a secret", "[api]\nlisten = \"localhost:9091\"\n", &spec.API{Listen: "localhost:9091"}},
		{"every key", `[api]
listen = "0.0.0.0:9090"
secret = "s3"
external_ui = "ui"
cors_allow_origins = ["https://dash.example.com", "http://10.0.0.2:8080"]
`, &spec.API{Listen: "0.0.0.0:9090", Secret: "s3", ExternalUI: filepath.Join(dir, "ui"),
			AllowOrigins: []string{"https://dash.example.com", "http://10.0.0.2:8080"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := parse([]byte(tt.text), path, dir)
			if err != nil {
				t.Fatal(err)
			}
			if !spec.Equal(s.API, tt.want) {
				t.Fatalf("got %+v, want %+v", s.API, tt.want)
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want want
	}{
		{"a public listen without a secret", "[log]\nlevel = \"info\"\n[api]\nlisten = \"0.0.0.0:9090\"\n",
			want{4, "api.listen", `"0.0.0.0" listens beyond loopback without a secret: set api.secret`}},
		{"every interface without a secret", "[api]\nlisten = \":9090\"\n",
			want{2, "api.listen", `":9090" listens beyond loopback without a secret`}},
		{"a LAN address without a secret", "[api]\nsecret = \"\"\nlisten = \"192.168.1.2:9090\"\n",
			want{3, "api.listen", "listens beyond loopback without a secret"}},
		{"no port", "[api]\nlisten = \"127.0.0.1\"\n", want{2, "api.listen", "is not host:port"}},
		{"a bad port", "[api]\nlisten = \"127.0.0.1:http\"\n", want{2, "api.listen", "the port must be a number"}},
		{"a name", "[api]\nlisten = \"example.com:9090\"\nsecret = \"x\"\n", want{2, "api.listen", "must be an IP address or localhost"}},
		{"an origin with a path", "[api]\ncors_allow_origins = [\"https://a.example/x\"]\n",
			want{2, "api.cors_allow_origins[0]", "is not an origin"}},
		{"a wildcard origin", "[api]\ncors_allow_origins = [\"*\"]\n", want{2, "api.cors_allow_origins[0]", "is not an origin"}},
		{"an unknown key", "[api]\nport = 9090\n", want{2, "api.port", `unknown key "port"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.text), "c.toml")
			errs, ok := err.(Errors)
			if !ok || len(errs) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			e := errs[0]
			if e.Line != tt.want.line || e.Key != tt.want.key || !strings.Contains(e.Msg, tt.want.msg) {
				t.Fatalf("got %q (line %d, key %q), want line %d key %q containing %q", e.Error(), e.Line, e.Key, tt.want.line, tt.want.key, tt.want.msg)
			}
		})
	}
}
