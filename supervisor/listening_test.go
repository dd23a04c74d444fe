package supervisor

import (
	"net/netip"
	"testing"

	"switchyard/spec"
)

// Listening follows the inbounds bound at start and moved by reloads,
// without the supervisor's lock.
func TestListeningFollowsTheInbounds(t *testing.T) {
	sv, addr := run(t, baseSpec(), Options{})
	if got := sv.Listening("socks-in"); got == nil || got.String() != addr {
		t.Fatalf("after start: %v, want %s", got, addr)
	}
	s := baseSpec()
	s.Inbounds = append(s.Inbounds, spec.Inbound{Tag: "socks2", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:0")})
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	if got := sv.Listening("socks2"); got == nil || got.String() != sv.Addr("socks2").String() {
		t.Fatalf("an added inbound: %v", got)
	}
	if err := sv.Apply(baseSpec()); err != nil {
		t.Fatal(err)
	}
	if got := sv.Listening("socks2"); got != nil {
		t.Fatalf("a removed inbound: %v", got)
	}
	if got := sv.Listening("socks-in"); got == nil || got.String() != addr {
		t.Fatalf("the kept inbound: %v", got)
	}
}
