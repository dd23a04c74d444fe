package api

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// /logs streams the process's records as they happen, at or above the
// level asked for, in Clash's {"type","payload"} form or, with
// format=structured, with their fields; over a WebSocket and chunked.
func TestLogsStream(t *testing.T) {
	hub := NewLogHub()
	log := slog.New(hub.Handler(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r := newRig(t, Options{Logs: hub})

	c := dialWS(t, r, "/logs?level=warning", nil)
	waitSubscribers(t, hub, 1)
	log.Info("not shown")
	log.With("component", "test").Warn("node dead", "node", "hk")
	var line struct{ Type, Payload string }
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := c.ReadJSON(&line); err != nil {
		t.Fatal(err)
	}
	if line.Type != "warning" || line.Payload != "node dead component=test node=hk" {
		t.Fatalf("ws line %+v", line)
	}

	req, _ := http.NewRequest("GET", r.base+"/logs?level=debug&format=structured", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitSubscribers(t, hub, 2)
	log.WithGroup("g").Debug("probe", "rtt", "42ms")
	var s struct {
		Level, Message string
		Fields         []logField
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no chunked line")
	}
	if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Level != "debug" || s.Message != "probe" || len(s.Fields) != 1 || s.Fields[0] != (logField{Key: "g.rtt", Value: "42ms"}) {
		t.Fatalf("structured line %+v", s)
	}
	if code, _ := r.do(t, "GET", "/logs?level=loud", "", ""); code != 400 {
		t.Fatalf("a bad level: %d", code)
	}
}

func waitSubscribers(t *testing.T, hub *LogHub, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		hub.mu.Lock()
		got := len(hub.subs)
		hub.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
