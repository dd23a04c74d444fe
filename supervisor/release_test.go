package supervisor

import (
	"runtime"
	"strconv"
	"testing"
	"weak"

	"switchyard/spec"
	"switchyard/test/socksclient"
)

// manyRules is n rules that match nothing the tests send.
func manyRules(n int) []spec.Rule {
	rules := make([]spec.Rule, n)
	for i := range rules {
		rules[i] = spec.Rule{DomainSuffix: []string{"r" + strconv.Itoa(i) + ".invalid"}, Outbound: "direct2"}
	}
	return rules
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A reload from 200,000 rules back to one gives the old plane, its compiled
// rules and the spec they came from back to the collector, and the apply
// itself collects them: nothing in the test runs a collection between the
// apply and the checks. A flow routed on the old plane stays open across
// the reload.
func TestAReloadReleasesTheOldPlaneAndItsRules(t *testing.T) {
	base := heapAlloc()
	big := baseSpec()
	big.Rules = manyRules(200_000)
	sv, proxy := run(t, big, Options{})

	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echoOnce(c, "on the big plane"); err != nil {
		t.Fatal(err)
	}
	old := sv.Plane()
	oldPlane := weak.Make(old)
	oldRules := weak.Make(&old.Rules[0])
	oldSpec := weak.Make(&big.Rules[0])
	old, big = nil, nil
	runtime.GC()
	held := heapAlloc() - base

	small := baseSpec()
	small.Rules = manyRules(1)
	if err := sv.Apply(small); err != nil {
		t.Fatal(err)
	}
	if oldPlane.Value() != nil {
		t.Error("the old plane was not collected by the apply")
	}
	if oldRules.Value() != nil {
		t.Error("the old plane's compiled rules were not collected by the apply")
	}
	if oldSpec.Value() != nil {
		t.Error("the old spec's rules were not collected by the apply")
	}
	if after := heapAlloc(); after > base+held/4 {
		t.Errorf("the heap holds %d bytes above its start after the reload; the 200,000 rules held %d", after-base, held)
	}
	if err := echoOnce(c, "after the reload"); err != nil {
		t.Fatalf("the flow did not survive the reload: %v", err)
	}
}

// The running state does not keep the rules of the spec it was built from:
// the plane holds them compiled, and the spec's copy is the caller's to drop.
func TestARunningPlaneDoesNotHoldItsSpecsRules(t *testing.T) {
	s := baseSpec()
	s.Rules = manyRules(1000)
	sv, _ := run(t, s, Options{})
	rules := weak.Make(&s.Rules[0])
	s = nil
	runtime.GC()
	if rules.Value() != nil {
		t.Error("the spec's rules are still reachable from the running supervisor")
	}
	if n := len(sv.Plane().Rules); n != 1000 {
		t.Fatalf("the plane has %d rules, want 1000", n)
	}
	s = baseSpec()
	s.Rules = manyRules(10)
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	rules = weak.Make(&s.Rules[0])
	s = nil
	runtime.GC()
	if rules.Value() != nil {
		t.Error("the applied spec's rules are still reachable from the running supervisor")
	}
}
