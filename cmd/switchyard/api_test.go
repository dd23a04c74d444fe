package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/config"
	"switchyard/supervisor"
)

// taken is a loopback address something already listens on.
func taken(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func apiConfig(listen string) []byte {
	return []byte(`[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[api]
listen = "` + listen + `"
`)
}

// A configured API that cannot bind fails the start.
func TestRunFailsWhenTheAPICannotBind(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	addr := taken(t)
	if err := os.WriteFile(cfg, apiConfig(addr), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := switchyard(t, "run", "-c", cfg)
	if code != 1 || !strings.Contains(stderr, "start failed") || !strings.Contains(stderr, addr) {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
}

// check refuses an API beyond loopback without a secret, naming the line.
func TestCheckRefusesAPublicAPIWithoutASecret(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[api]\nlisten = \"0.0.0.0:9090\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := switchyard(t, "check", "-c", cfg)
	want := cfg + ":2: api.listen: \"0.0.0.0\" listens beyond loopback without a secret"
	if code == 0 || !strings.Contains(stderr, want) {
		t.Fatalf("exit code %d; stderr:\n%s\nwant a line with %s", code, stderr, want)
	}
}

func TestStartAPI(t *testing.T) {
	free := taken(t)
	for _, tt := range []struct {
		name     string
		listen   string
		optional bool
		serves   bool
		fails    bool
	}{
		{"serves", "127.0.0.1:0", false, true, false},
		{"a taken port fails", free, false, false, true},
		{"a taken port is a warning when optional", free, true, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := config.Parse(apiConfig(tt.listen), "api.toml")
			if err != nil {
				t.Fatal(err)
			}
			sv, err := supervisor.New(s, supervisor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sv.Close()
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			srv, err := startAPI(s, sv, log, serveOptions{apiOptional: tt.optional})
			if (err != nil) != tt.fails || (srv != nil) != tt.serves {
				t.Fatalf("server %v, error %v", srv, err)
			}
			if tt.optional && !strings.Contains(logs.String(), "level=WARN msg=\"the API is not served\"") {
				t.Fatalf("no warning: %s", logs.String())
			}
			if srv == nil {
				return
			}
			defer srv.Close()
			resp, err := http.Get("http://" + srv.Addr().String() + "/version")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var v struct {
				Meta bool `json:"meta"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || !v.Meta {
				t.Fatalf("version: %+v %v", v, err)
			}
		})
	}
}
