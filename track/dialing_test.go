package track

import (
	"testing"

	"switchyard/netx"
)

// A dial is listed from its start to its end, apart from the flows, and
// counts as open.
func TestDialsInProgress(t *testing.T) {
	tr := New()
	if len(tr.Dials()) != 0 || tr.Open() != 0 {
		t.Fatal("a new tracker lists dials")
	}
	a := tr.BeginDial(Meta{Network: netx.TCP, Inbound: "in", Outbound: "slow@v1"})
	b := tr.BeginDial(Meta{Network: netx.TCP, Inbound: "in", Outbound: "slow@v1", Rule: "rule 2"})
	ds := tr.Dials()
	if len(ds) != 2 || ds[0].ID >= ds[1].ID || ds[1].Rule != "rule 2" || ds[0].Start.IsZero() {
		t.Fatalf("dials %+v", ds)
	}
	if tr.DialsInProgress() != 2 || tr.Open() != 2 || len(tr.Flows()) != 0 {
		t.Fatalf("in progress %d, open %d, flows %d", tr.DialsInProgress(), tr.Open(), len(tr.Flows()))
	}
	a.End()
	a.End()
	if ds := tr.Dials(); len(ds) != 1 || ds[0].Rule != "rule 2" {
		t.Fatalf("after one End: %+v", ds)
	}
	b.End()
	if tr.DialsInProgress() != 0 {
		t.Fatal("an ended dial is still listed")
	}
}
