package api

import (
	"bufio"
	"net/http"
	"testing"
	"time"
)

// Close ends open streams, WebSocket and chunked, and waits for them.
func TestCloseEndsStreams(t *testing.T) {
	r := newRig(t, Options{})
	ws := dialWS(t, r, "/connections?interval=100", nil)
	resp, err := http.Get(r.base + "/memory")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first line")
	}
	done := make(chan error, 1)
	go func() { done <- r.srv.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on the streams")
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := ws.NextReader(); err != nil {
			break
		}
	}
	for sc.Scan() {
	}
	if r.srv.Close() != nil {
		t.Fatal("a second Close")
	}
	if err := r.srv.Start("127.0.0.1:0"); err == nil {
		t.Fatal("Start after Close")
	}
}
