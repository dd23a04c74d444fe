package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// Every failure kind the spec names, with where it may open hard state.
var provenance = []struct {
	kind score.FailureKind
	want score.Provenance
}{
	{score.TargetPath, score.TargetScoped},
	{score.TargetRefused, score.TargetScoped},
	{score.StreamReset, score.TargetScoped},
	{score.AnyTLSSynAckTimeout, score.TargetScoped},
	{score.EndToEndQUIC, score.TargetScoped},
	{score.EndpointStream, score.TargetScoped},
	{score.FlowIO, score.TargetScoped},
	{score.ProxyProtocol, score.NodeScoped},
	{score.ProxyAuth, score.NodeScoped},
	{score.Framing, score.NodeScoped},
	{score.SharedCarrier, score.NodeScoped},
	{score.SharedDial, score.NodeScoped},
	{score.SharedSource, score.NodeScoped},
	{score.XUDPEndError, score.NodeScoped},
	{score.QUICPathStall, score.NodeScoped},
	{score.EndpointLoss, score.NodeScoped},
	{score.AnyTLSSessionRetired, score.NodeScoped},
	{score.UoTOpenFailed, score.NodeScoped},
	{score.VMessEOFBeforeHeader, score.TargetScoped}, // ambiguous: an I/O failure, not the node's
	{score.VMessBadHeader, score.NodeScoped},
	{score.UnknownPreSetup, score.NodeScoped},
	{score.FailureKind(0), score.NodeScoped},   // unset: the conservative side
	{score.FailureKind(200), score.NodeScoped}, // unknown: likewise
}

func TestProvenance(t *testing.T) {
	for _, c := range provenance {
		t.Run(c.kind.String(), func(t *testing.T) {
			if got := c.kind.Provenance(); got != c.want {
				t.Fatalf("provenance %v, want %v", got, c.want)
			}
			h := newHarness(t, 1)
			a, b := scope(target(1), 1), scope(target(2), 1)
			for range 4 {
				h.useful(a)
				h.useful(b)
			}
			h.clk.Advance(time.Second)
			h.fail(a, c.kind)
			va, vb := h.view(a), h.view(b)
			// Every failure keeps its numeric outcome in all three layers.
			for _, l := range []score.Layer{va.Global, va.Family, va.Exact} {
				if l.Failures < 0.99 {
					t.Errorf("failure not counted: %+v", l)
				}
			}
			if !va.Exact.Hard || va.Exact.Qualified {
				t.Errorf("the failed target is not hard: %+v", va.Exact)
			}
			node := c.want == score.NodeScoped
			if va.Global.Hard != node || va.Family.Hard != node {
				t.Errorf("aggregates hard %v/%v, want %v", va.Global.Hard, va.Family.Hard, node)
			}
			// The unrelated target: fenced by a node failure only.
			if vb.Exact.Hard != node || vb.Exact.Qualified == node {
				t.Errorf("other target hard %v qualified %v; node-scoped %v", vb.Exact.Hard, vb.Exact.Qualified, node)
			}
			if vb.Exact.Failures != 0 {
				t.Errorf("other target counted the failure: %+v", vb.Exact)
			}
		})
	}
}

func TestTargetlessFailureIsNodeScoped(t *testing.T) {
	h := newHarness(t, 1)
	tl := scope(netx.Addr{}, 1)
	a := scope(target(1), 1)
	h.useful(a)
	h.fail(tl, score.TargetPath)
	if v := h.view(a); !v.Global.Hard || !v.Exact.Hard {
		t.Fatalf("a targetless target-path failure stayed off the node: %+v", v)
	}
}

// A failure before setup weighs SetupFailureWeight terminal failures in the
// bounds; after setup it weighs one.
func TestSetupFailureWeight(t *testing.T) {
	h := newHarness(t, 3)
	pre, post, post2 := scope(target(1), 1), scope(target(1), 2), scope(target(1), 3)
	for _, sc := range []score.Scope{pre, post, post2} {
		for range 5 {
			h.useful(sc)
		}
	}
	r := h.begin(pre)
	r.Fail(h.now(), score.Failure{Kind: score.TargetRefused}) // before setup
	h.fail(post, score.FlowIO)                                // h.open: after setup
	h.fail(post2, score.FlowIO)
	h.fail(post2, score.FlowIO)
	vp, v1, v2 := h.view(pre), h.view(post), h.view(post2)
	if !near(vp.Exact.SetupFailures, 1) || v1.Exact.SetupFailures != 0 {
		t.Fatalf("setup failures %v / %v", vp.Exact.SetupFailures, v1.Exact.SetupFailures)
	}
	if !(vp.Rate < v1.Rate && vp.Lower < v1.Lower && vp.Upper < v1.Upper) {
		t.Errorf("a setup failure weighs no more than a terminal one: %+v vs %+v", vp, v1)
	}
	if score.SetupFailureWeight == 2 && (!near(vp.Rate, v2.Rate) || !near(vp.Lower, v2.Lower) || !near(vp.Upper, v2.Upper)) {
		t.Errorf("one setup failure %v/%v/%v differs from two terminal ones %v/%v/%v", vp.Rate, vp.Lower, vp.Upper, v2.Rate, v2.Lower, v2.Upper)
	}
}

func TestBoundsNarrowWithEvidence(t *testing.T) {
	h := newHarness(t, 2)
	few, many := scope(target(1), 1), scope(target(1), 2)
	h.useful(few)
	h.fail(few, score.FlowIO)
	for range 20 {
		h.useful(many)
		h.fail(many, score.FlowIO)
	}
	vf, vm := h.view(few), h.view(many)
	if !(vf.Lower <= vf.Rate && vf.Rate <= vf.Upper) || !near(vm.Rate, 0.5) {
		t.Fatalf("bounds %v", vf)
	}
	if !(vm.Upper-vm.Lower < vf.Upper-vf.Lower) {
		t.Errorf("more evidence did not narrow the bounds: %v vs %v", vm, vf)
	}
}
