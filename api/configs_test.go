package api

import (
	"log/slog"
	"net"
	"testing"
)

func TestConfigs(t *testing.T) {
	lv := new(slog.LevelVar)
	r := newRig(t, Options{LogLevel: lv})
	var c map[string]any
	r.get(t, "/configs", 200, &c)
	if c["mode"] != "rule" || c["log-level"] != "info" || c["allow-lan"] != false || c["mixed-port"] != float64(0) ||
		c["socks-port"] == nil || c["port"] != float64(0) {
		t.Fatalf("configs: %v", c)
	}
	// The socks inbound listens on port 0: the port reported is the one
	// bound.
	if want := r.sv.Addr("socks-in").(*net.TCPAddr).Port; c["socks-port"] != float64(want) {
		t.Fatalf("socks-port %v, want the bound %d", c["socks-port"], want)
	}
	if code, b := r.do(t, "PATCH", "/configs", "", `{"log-level":"debug"}`); code != 204 {
		t.Fatalf("patch: %d %s", code, b)
	}
	if lv.Level() != slog.LevelDebug {
		t.Fatalf("the process's level: %v", lv.Level())
	}
	r.get(t, "/configs", 200, &c)
	if c["log-level"] != "debug" {
		t.Fatalf("after patch: %v", c)
	}
	for _, body := range []string{`{"log-level":"loud"}`, `{"mode":"script"}`, `{"allow-lan":true}`, `[`} {
		if code, _ := r.do(t, "PATCH", "/configs", "", body); code != 400 {
			t.Fatalf("patch %s: %d", body, code)
		}
	}
	if code, _ := r.do(t, "PATCH", "/configs", "", `{"mode":"rule"}`); code != 204 {
		t.Fatalf("mode rule: %d", code)
	}
}
