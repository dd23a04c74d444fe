package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// scoreBody is GET /switchyard/v1/groups/{name}/score's body, as read.
type scoreBody struct {
	Group            string  `json:"group"`
	Network          string  `json:"network"`
	Family           string  `json:"family"`
	Exact            *bool   `json:"exact"`
	Selected         *string `json:"selected"`
	Provisional      *bool   `json:"provisional"`
	ObservedUsable   *bool   `json:"observedUsable"`
	Question         string  `json:"question"`
	WaitReason       string  `json:"waitReason"`
	NextBusinessFlow *struct {
		Member   string `json:"member"`
		Question string `json:"question"`
	} `json:"nextBusinessFlow"`
	Relations []json.RawMessage `json:"relations"`
	Members   []struct {
		Member     string `json:"member"`
		Question   string `json:"question"`
		WaitReason string `json:"waitReason"`
	} `json:"members"`
	LastReason *string `json:"lastReason"`
}

// settled waits until the Score counters stop moving: the flows just
// closed have settled.
func settled(t *testing.T, r *rig) []byte {
	t.Helper()
	var prev []byte
	for range 40 {
		_, b := r.do(t, "GET", "/switchyard/v1/stats/score", r.srv.opts.Secret, "")
		if prev != nil && bytes.Equal(prev, b) {
			return b
		}
		prev = b
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the Score counters never settled")
	return nil
}

// The Score explanation endpoint is behind the secret; it serves the
// aggregate read per network and family with members named by tag, and
// one exact target's read on request; neither names a node, and the
// aggregate read names no target. Bad parameters, unknown groups and
// other policies are refused.
func TestTheScoreExplanationEndpoint(t *testing.T) {
	r := newRigWith(t, Options{Secret: "s3"}, scoreConfig)
	const path = "/switchyard/v1/groups/smart/score"
	if code, _ := r.do(t, "GET", path, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d", code)
	}
	dst := echo(t)
	for range 4 {
		r.flow(t, dst).Close()
	}
	settled(t, r)
	ids := []string{r.nodeID(t, "d1"), r.nodeID(t, "d2")}
	noIdentity := func(b []byte) {
		t.Helper()
		for _, id := range ids {
			if strings.Contains(string(b), id) {
				t.Fatalf("the explanation names a node: %s", b)
			}
		}
	}
	members := []string{"d1", "d2"}

	for _, q := range []string{"", "?network=tcp&family=ipv4", "?network=udp", "?family=ipv6"} {
		code, b := r.do(t, "GET", path+q, "s3", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", q, code, b)
		}
		noIdentity(b)
		host, _, _ := strings.Cut(dst, ":")
		if strings.Contains(string(b), host) {
			t.Fatalf("the aggregate read names the target: %s", b)
		}
		var x scoreBody
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		if x.Group != "smart" || x.Exact == nil || *x.Exact || x.Selected == nil || x.Provisional == nil || x.ObservedUsable == nil ||
			x.Question == "" || x.WaitReason == "" || x.Relations == nil || x.Members == nil || x.LastReason == nil {
			t.Fatalf("GET %s: shape %s", q, b)
		}
		if q == "" || strings.Contains(q, "tcp") {
			if x.Network != "tcp" || x.Family != "ipv4" || !slices.Contains(members, *x.Selected) || len(x.Members) != 1 ||
				!slices.Contains(members, x.Members[0].Member) || x.Members[0].Member == *x.Selected || *x.LastReason == "" {
				t.Fatalf("GET %s: %s", q, b)
			}
		}
	}

	code, b := r.do(t, "GET", path+"?target="+url.QueryEscape(dst), "s3", "")
	if code != http.StatusOK {
		t.Fatalf("exact: %d %s", code, b)
	}
	noIdentity(b)
	var x scoreBody
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	if !*x.Exact || !slices.Contains(members, *x.Selected) {
		t.Fatalf("exact: %s", b)
	}
	if strings.Contains(string(b), dst) {
		t.Fatalf("the exact read echoes the target: %s", b)
	}

	// The group view carries the aggregate summary too.
	var ng struct {
		Networks map[string]struct {
			Score *scoreBody `json:"score"`
		} `json:"networks"`
	}
	r.get(t, "/switchyard/v1/groups/smart", http.StatusOK, &ng)
	if s := ng.Networks["tcp"].Score; s == nil || s.Selected == nil || !slices.Contains(members, *s.Selected) {
		t.Fatalf("the group view's Score summary: %+v", ng.Networks["tcp"])
	}
	r.get(t, "/switchyard/v1/groups/pick", http.StatusOK, &ng)
	if ng.Networks["tcp"].Score != nil {
		t.Fatal("a selector's view has a Score summary")
	}

	for q, want := range map[string]int{
		path + "?network=sctp":                http.StatusBadRequest,
		path + "?family=ipv5":                 http.StatusBadRequest,
		path + "?target=nope":                 http.StatusBadRequest,
		"/switchyard/v1/groups/pick/score":    http.StatusBadRequest,
		"/switchyard/v1/groups/nothing/score": http.StatusNotFound,
	} {
		if code, b := r.do(t, "GET", q, "s3", ""); code != want {
			t.Fatalf("GET %s: %d %s, want %d", q, code, b, want)
		}
	}
}

// Reading the explanation advances nothing: the same read twice gives the
// same body, aggregate or exact, and /switchyard/v1/stats/score is what
// it was.
func TestTheScoreExplanationIsReadonly(t *testing.T) {
	r := newRigWith(t, Options{Secret: "s3"}, scoreConfig)
	dst := echo(t)
	for range 4 {
		r.flow(t, dst).Close()
	}
	before := settled(t, r)
	for _, q := range []string{"?network=tcp", "?network=udp", "?target=" + url.QueryEscape(dst)} {
		_, b1 := r.do(t, "GET", "/switchyard/v1/groups/smart/score"+q, "s3", "")
		_, b2 := r.do(t, "GET", "/switchyard/v1/groups/smart/score"+q, "s3", "")
		if !bytes.Equal(b1, b2) {
			t.Fatalf("two reads of %s differ:\n%s\n%s", q, b1, b2)
		}
		r.do(t, "GET", "/switchyard/v1/groups/smart", "s3", "")
	}
	if _, after := r.do(t, "GET", "/switchyard/v1/stats/score", "s3", ""); !bytes.Equal(before, after) {
		t.Fatalf("reads moved the Score counters:\n%s\n%s", before, after)
	}
}
