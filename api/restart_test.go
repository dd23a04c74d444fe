package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// POST /restart answers {"status":"ok"} once the hook has the restart
// under way, 500 with the hook's reason when it cannot begin, and 501
// without a hook; it is POST only and behind the secret.
func TestRestart(t *testing.T) {
	var calls atomic.Int32
	var refuse atomic.Bool
	r := newRig(t, Options{Secret: "s", Restart: func() error {
		calls.Add(1)
		if refuse.Load() {
			return errors.New("a restart is already under way")
		}
		return nil
	}})
	if code, _ := r.do(t, http.MethodPost, "/restart", "", ""); code != http.StatusUnauthorized || calls.Load() != 0 {
		t.Fatalf("without the secret: %d, %d calls", code, calls.Load())
	}
	if code, _ := r.do(t, http.MethodGet, "/restart", "s", ""); code != http.StatusMethodNotAllowed || calls.Load() != 0 {
		t.Fatalf("GET /restart: %d, %d calls", code, calls.Load())
	}
	code, body := r.do(t, http.MethodPost, "/restart", "s", "")
	var ok struct {
		Status string `json:"status"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &ok) != nil || ok.Status != "ok" || calls.Load() != 1 {
		t.Fatalf("POST /restart: %d %s, %d calls", code, body, calls.Load())
	}
	refuse.Store(true)
	code, body = r.do(t, http.MethodPost, "/restart", "s", "")
	if code != http.StatusInternalServerError || !strings.Contains(string(body), "already under way") {
		t.Fatalf("POST /restart refused by the hook: %d %s", code, body)
	}

	bare := newRig(t, Options{})
	code, body = bare.do(t, http.MethodPost, "/restart", "", "")
	if code != http.StatusNotImplemented || !strings.Contains(string(body), "not available") {
		t.Fatalf("POST /restart without a hook: %d %s", code, body)
	}
}
