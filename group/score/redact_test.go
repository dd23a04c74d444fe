package score_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
)

// Nothing the package prints, marshals or logs names a node or a target.
func TestNoIdentityInOutput(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(netx.DomainAddr("Secret-Target.Example.", 8443), 1)
	r := h.live(sc)
	v := h.view(sc)
	ip := scope(netx.AddrFromAddrPort(netip.MustParseAddrPort("198.51.100.77:5353")), 1)
	var out bytes.Buffer
	for _, x := range []any{sc, &sc, r, ip, v} {
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			fmt.Fprintf(&out, f+"\n", x)
		}
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatalf("marshal %T: %v", x, err)
		}
		out.Write(b)
	}
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("x", "scope", sc, "reporter", r, "ip", ip)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "scope", sc, "reporter", r)
	text := strings.ToLower(out.String())
	node := sc.Node.String()
	for _, leak := range []string{"secret", "198.51.100.77", "5353", "8443", node, node[:8], "beef", "190 239", "0xbe"} {
		if strings.Contains(text, leak) {
			t.Errorf("output contains %q:\n%s", leak, out.String())
		}
	}
	if !strings.Contains(text, "tcp") {
		t.Errorf("output lost the network:\n%s", out.String())
	}
}
