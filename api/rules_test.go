package api

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"switchyard/spec"
)

// GET /rules lists the rules then the final target as MATCH, with the
// flows each routed.
func TestRules(t *testing.T) {
	r := newRig(t, Options{})
	r.flow(t, echo(t))
	var got struct {
		Rules []ruleJSON `json:"rules"`
	}
	r.get(t, "/rules", 200, &got)
	if len(got.Rules) != 1 || got.Rules[0].Type != "Match" || got.Rules[0].Proxy != "pick" || got.Rules[0].Hits != 1 {
		t.Fatalf("rules %+v", got.Rules)
	}
}

func TestDescribeRule(t *testing.T) {
	for _, tc := range []struct {
		r            spec.Rule
		typ, payload string
	}{
		{spec.Rule{DomainSuffix: []string{"example.com"}}, "DomainSuffix", "example.com"},
		{spec.Rule{IPCIDR: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "IPCIDR", "10.0.0.0/8"},
		{spec.Rule{Port: []uint16{53, 853}}, "DstPort", "53,853"},
		{spec.Rule{Network: "udp", Port: []uint16{53}}, "AND", "network=udp; port=53"},
		{spec.Rule{Inbound: []string{"socks-in"}}, "InName", "socks-in"},
		{spec.Rule{User: []string{"alice"}}, "InUser", "alice"},
		{spec.Rule{RuleSet: []spec.RuleSet{{Tag: "geosite-cn"}}}, "RuleSet", "geosite-cn"},
		{spec.Rule{GeoIP: []string{"CN"}}, "GEOIP", "CN"},
		{spec.Rule{}, "Match", ""},
	} {
		if typ, payload := describeRule(tc.r); typ != tc.typ || payload != tc.payload {
			t.Errorf("%+v: %s %q, want %s %q", tc.r, typ, payload, tc.typ, tc.payload)
		}
	}
}

// PATCH /rules/disable switches a rule off for the next flows (GET /rules
// shows it in extra.disabled) and back on; the final cannot be switched
// off, and a bad index changes nothing.
func TestDisableRules(t *testing.T) {
	dst := echo(t)
	_, port, _ := net.SplitHostPort(dst)
	r := newRigWith(t, Options{}, `
[[rules]]
port = [`+port+`]
outbound = "d2"
`)
	type rules struct {
		Rules []ruleJSON `json:"rules"`
	}
	var got rules
	r.get(t, "/rules", 200, &got)
	if len(got.Rules) != 2 || got.Rules[0].Extra.Disabled || got.Rules[1].Type != "Match" {
		t.Fatalf("rules %+v", got.Rules)
	}
	patch := func(body string) (int, string) {
		t.Helper()
		code, b := r.do(t, http.MethodPatch, "/rules/disable", "", body)
		return code, string(b)
	}
	if code, b := patch(`{"0": true}`); code != http.StatusNoContent {
		t.Fatalf("switching rule 0 off: %d %s", code, b)
	}
	r.flow(t, dst).Close()
	r.get(t, "/rules", 200, &got)
	if !got.Rules[0].Extra.Disabled || got.Rules[0].Extra.Hits != 0 || got.Rules[1].Extra.Hits != 1 {
		t.Fatalf("rule 0 off, one flow: %+v", got.Rules)
	}
	if code, b := patch(`{"0": false}`); code != http.StatusNoContent {
		t.Fatalf("switching rule 0 on: %d %s", code, b)
	}
	r.flow(t, dst).Close()
	r.get(t, "/rules", 200, &got)
	if got.Rules[0].Extra.Disabled || got.Rules[0].Extra.Hits != 1 || got.Rules[0].Hits != 1 {
		t.Fatalf("rule 0 on again, one more flow: %+v", got.Rules)
	}
	for _, body := range []string{`{"1": true}`, `{"0": true, "7": true}`, `{"x": true}`, `[]`} {
		if code, b := patch(body); code != http.StatusBadRequest || !json.Valid([]byte(b)) {
			t.Fatalf("PATCH /rules/disable %s: %d %s", body, code, b)
		}
	}
	if code, _ := patch(`{"1": false}`); code != http.StatusNoContent {
		t.Fatalf("switching the final on (a no-op): %d", code)
	}
	r.get(t, "/rules", 200, &got)
	if got.Rules[0].Extra.Disabled {
		t.Fatal("a refused request switched rule 0 off")
	}
}
