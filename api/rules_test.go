package api

import (
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
		{spec.Rule{}, "Match", ""},
	} {
		if typ, payload := describeRule(tc.r); typ != tc.typ || payload != tc.payload {
			t.Errorf("%+v: %s %q, want %s %q", tc.r, typ, payload, tc.typ, tc.payload)
		}
	}
}
