package route

import (
	"testing"

	"switchyard/internal/geoiptest"
	"switchyard/netx"
	"switchyard/spec"
)

func TestGeoIPKey(t *testing.T) {
	db := geoiptest.Write(t, t.TempDir(), map[string]string{
		"1.0.0.0/8": "CN", "8.8.8.0/24": "US", "2400:3200::/32": "CN",
	})
	r, err := Compile(spec.Rule{GeoIP: []string{"CN"}, GeoIPPath: db})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"1.2.3.4": true, "2400:3200::1": true, "8.8.8.8": false, "9.9.9.9": false, "::ffff:1.9.9.9": true,
	} {
		f := netx.Flow{Dst: netx.Addr{IP: ip(s), Port: 443}}
		if got := r.Match(&f); got != want {
			t.Errorf("%s: %v, want %v", s, got, want)
		}
	}
	named := netx.Flow{Dst: netx.DomainAddr("example.cn", 443)}
	if r.Match(&named) {
		t.Error("a flow by name (no IP) matched a geoip rule")
	}
	hit := netx.Flow{Dst: netx.Addr{IP: ip("1.2.3.4"), Port: 443}}
	if n := testing.AllocsPerRun(100, func() { r.Match(&hit) }); n != 0 {
		t.Errorf("a geoip match allocates %v times", n)
	}
}
