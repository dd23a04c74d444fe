package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

func send(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, resp.Header, b.String()
}

func TestSecret(t *testing.T) {
	r := newRig(t, Options{Secret: "s3cret"})
	for _, tt := range []struct {
		name, path, auth string
		want             int
	}{
		{"missing", "/proxies", "", 401},
		{"wrong", "/proxies", "Bearer nope", 401},
		{"not bearer", "/proxies", "s3cret", 401},
		{"a prefix of it", "/proxies", "Bearer s3cre", 401},
		{"token on a plain request", "/proxies?token=s3cret", "", 401},
		{"right", "/proxies", "Bearer s3cret", 200},
	} {
		req, _ := http.NewRequest("GET", r.base+tt.path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		code, _, body := send(t, req)
		if code != tt.want {
			t.Fatalf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
		if code == 401 && strings.TrimSpace(body) != `{"message":"Unauthorized"}` {
			t.Fatalf("%s: body %s", tt.name, body)
		}
	}
	ws := "ws" + strings.TrimPrefix(r.base, "http")
	if _, resp, err := websocket.DefaultDialer.Dial(ws+"/traffic?token=nope", nil); err == nil || resp.StatusCode != 401 {
		t.Fatalf("a wrong token on an upgrade: %v", err)
	}
	c, _, err := websocket.DefaultDialer.Dial(ws+"/traffic?token=s3cret", nil)
	if err != nil {
		t.Fatalf("the token on an upgrade: %v", err)
	}
	c.Close()
	// With a secret, any Host and origin may ask: the token authorizes.
	req, _ := http.NewRequest("GET", r.base+"/version", nil)
	req.Host = "dash.example.com"
	req.Header.Set("Origin", "https://dash.example.com")
	req.Header.Set("Authorization", "Bearer s3cret")
	if code, h, body := send(t, req); code != 200 || h.Get("Access-Control-Allow-Origin") != "https://dash.example.com" {
		t.Fatalf("a remote dashboard with the secret: %d %s %v", code, body, h)
	}
}

func TestNoSecretGuards(t *testing.T) {
	r := newRig(t, Options{AllowOrigins: []string{"https://dash.example.com"}})
	for _, tt := range []struct {
		name, host, origin string
		want               int
	}{
		{"loopback host", "", "", 200},
		{"localhost", "localhost:9090", "", 200},
		{"ipv6 loopback", "[::1]:9090", "", 200},
		{"a rebinding name", "attacker.example:9090", "", 403},
		{"a LAN address", "192.168.1.2:9090", "", 403},
		{"a loopback origin", "", "http://localhost:3000", 200},
		{"a listed origin", "", "https://dash.example.com", 200},
		{"another origin", "", "https://evil.example", 403},
		{"a null origin", "", "null", 403},
	} {
		req, _ := http.NewRequest("GET", r.base+"/version", nil)
		if tt.host != "" {
			req.Host = tt.host
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		code, _, body := send(t, req)
		if code != tt.want {
			t.Fatalf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
		if code == 403 && !strings.HasPrefix(body, `{"message":`) {
			t.Fatalf("%s: body %s", tt.name, body)
		}
	}
	// A preflight from an allowed origin is answered; one from another
	// origin gets no CORS grant.
	for origin, granted := range map[string]bool{"https://dash.example.com": true, "http://127.0.0.1:5173": true, "https://evil.example": false} {
		req, _ := http.NewRequest("OPTIONS", r.base+"/proxies/pick", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PUT")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		_, h, _ := send(t, req)
		if got := h.Get("Access-Control-Allow-Origin") == origin; got != granted {
			t.Fatalf("preflight from %s: granted %v, headers %v", origin, got, h)
		}
	}
	// A cross-origin WebSocket from another origin is refused too.
	h := http.Header{"Origin": {"https://evil.example"}}
	if _, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.base, "http")+"/traffic", h); err == nil || resp.StatusCode != 403 {
		t.Fatalf("a ws from another origin: %v", err)
	}
}

func TestExternalUI(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/index.html", "<h1>dash</h1>"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Options{ExternalUI: dir, Secret: "x"})
	code, b := r.do(t, "GET", "/ui/", "", "")
	if code != 200 || !strings.Contains(string(b), "dash") {
		t.Fatalf("ui: %d %s", code, b)
	}
}
