package api

import "testing"

// metacubexd's rules page asks GET /providers/rules next to /rules; a 404
// there shows as a failed request. With no rule providers it is an empty
// map, as /providers/proxies is, in the shape mihomo answers.
func TestRuleProvidersEmpty(t *testing.T) {
	r := newRig(t, Options{Secret: "s"})
	var prov map[string]map[string]any
	r.get(t, "/providers/rules", 200, &prov)
	if p, ok := prov["providers"]; !ok || len(p) != 0 {
		t.Fatalf("GET /providers/rules: %v, want {\"providers\": {}}", prov)
	}
	if code, _ := r.do(t, "GET", "/providers/rules", "", ""); code != 401 {
		t.Fatalf("GET /providers/rules without the secret: %d, want 401", code)
	}
}
