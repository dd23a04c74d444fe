package dns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	mdns "github.com/miekg/dns"

	"switchyard/spec"
)

func TestRouterRuleSet(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ads.json")
	src := `{"version": 2, "rules": [{"domain_suffix": ["ads.example"], "domain_keyword": ["tracker"]}, {"ip_cidr": "10.0.0.0/8"}]}`
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	z := newZone()
	def := newResolver(t, Options{}, "udp://"+startUDP(t, z).String())
	rs := []spec.RuleSet{{Tag: "ads", Path: p, Format: "source"}}
	rt := NewRouter(def, []Rule{{Names: names(t, spec.Rule{RuleSet: rs}), Action: BlockNXDomain}})
	for name, blocked := range map[string]bool{
		"x.ads.example.": true, "ads.example": true, "my-tracker.net": true, "example.org": false,
	} {
		if _, act := rt.Pick(name); (act == BlockNXDomain) != blocked {
			t.Errorf("%s: action %v, blocked want %v", name, act, blocked)
		}
	}
	m := new(mdns.Msg)
	m.SetQuestion("www.ads.example.", mdns.TypeA)
	resp, err := rt.Exchange(context.Background(), m)
	if err != nil || resp.Rcode != mdns.RcodeNameError {
		t.Fatalf("Exchange: %v %v, want NXDOMAIN", resp, err)
	}
	if _, err := rt.LookupIP(context.Background(), "a.ads.example"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("LookupIP: %v, want ErrBlocked", err)
	}
}
