package supervisor

import (
	"testing"

	"switchyard/spec"
)

// realitySpec is planSpec with a VLESS + Vision outbound over REALITY.
func realitySpec(shortID byte) *spec.Spec {
	s := planSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "jp", Type: "vless", AddressFamily: "auto", UDP: true,
		Server: "127.0.0.1:443", UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Flow: "xtls-rprx-vision",
		TLS: &spec.TLS{ServerName: "www.example.com", Fingerprint: "chrome",
			Reality: &spec.Reality{PublicKey: [32]byte{9: 1}, ShortID: [8]byte{shortID}, SpiderX: "/"}}})
	return s
}

// A reload with the same REALITY table (a new table, equal) reuses the
// running outbound; another short id builds the next version and drains
// the old one.
func TestARealityChangeIsANewVersion(t *testing.T) {
	_, st := applyPlan(t, nil, realitySpec(1))
	first := st.outbounds["jp"].target
	p, st2 := applyPlan(t, st, realitySpec(1))
	if st2.outbounds["jp"].target != first || len(p.plan.drains) != 0 {
		t.Fatal("an unchanged REALITY outbound was not reused")
	}
	p, st3 := applyPlan(t, st2, realitySpec(2))
	if v := versionOf(st3, "jp"); v != 2 {
		t.Fatalf("a changed short id built v%d", v)
	}
	if len(p.plan.drains) != 1 || p.plan.drains[0].tag != "jp" || p.plan.drains[0].version != 1 {
		t.Fatalf("drains %+v", p.plan.drains)
	}
}
