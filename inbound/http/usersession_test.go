package http

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/spec"
	"switchyard/track"
)

// sessionConnector is the test connector with sessions kept by a tracker.
type sessionConnector struct {
	*inboundtest.Connector
	tr *track.Tracker
}

func (c sessionConnector) OpenSession(info track.SessionInfo) *track.Session {
	return c.tr.OpenSession(info)
}

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// A keep-alive connection is one session of the user its requests
// authenticate as; a request authenticating as another user ends it and
// starts one of that user; the last ends with the connection.
func TestAConnectionIsASessionOfItsUser(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer web.Close()
	tr := track.New()
	conn := sessionConnector{inboundtest.NewConnector(t), tr}
	cfg := Config{Tag: "http-in", Users: []spec.User{{Username: "alice", Password: "a"}, {Username: "bob", Password: "b"}}}
	proxy := inboundtest.Serve(t, New(cfg, conn, inboundtest.Logger(t)))

	cl := dial(t, proxy)
	get := func(user, pass string) {
		cl.send(fmt.Sprintf("GET %s/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\n\r\n", web.URL, basic(user, pass)))
		if resp, body := cl.response("GET"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", user, resp.StatusCode, body)
		}
	}
	get("alice", "a")
	get("alice", "a")
	first := tr.Sessions()
	if len(first) != 1 || first[0].User != "alice" || first[0].Inbound != "http-in" {
		t.Fatalf("sessions %+v, want alice's", first)
	}
	get("bob", "b")
	second := tr.Sessions()
	if len(second) != 1 || second[0].User != "bob" || second[0].ID == first[0].ID {
		t.Fatalf("sessions %+v after bob's request, want bob's alone", second)
	}
	flows := conn.Flows()
	if len(flows) != 2 || flows[0].Session != first[0].ID || flows[1].Session != second[0].ID {
		t.Fatalf("flows %+v, want alice's under %d then bob's under %d", flows, first[0].ID, second[0].ID)
	}
	cl.c.Close()
	for range 500 {
		if len(tr.Sessions()) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sessions %+v after the connection closed", tr.Sessions())
}
