package tun

import (
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// ruleLines renders rules as ip rule would, for comparison.
func ruleLines(cfg Config) []string {
	var out []string
	for _, r := range rules(cfg.Route, cfg) {
		fam := "4"
		if r.Family == unix.AF_INET6 {
			fam = "6"
		}
		s := fam + " " + strconv.Itoa(r.Priority) + ":"
		if r.Invert {
			s += " not"
		}
		if r.Mark != 0 {
			s += " fwmark"
		}
		if r.Dst != nil {
			s += " to " + r.Dst.String()
		}
		switch {
		case r.Type == unix.RTN_UNREACHABLE:
			s += " unreachable"
		default:
			s += " lookup " + strconv.Itoa(r.Table)
		}
		out = append(out, s)
	}
	return out
}

func TestRules(t *testing.T) {
	v4 := []netip.Prefix{netip.MustParsePrefix("172.19.0.1/30")}
	both := append(slices.Clone(v4), netip.MustParsePrefix("fdfe::1/126"))
	for _, tc := range []struct {
		name  string
		addrs []netip.Prefix
		route Route
		want  []string
	}{
		{"auto_route", both, Route{Mark: 1}, []string{"4 9000: not fwmark lookup 2022", "6 9000: not fwmark lookup 2022"}},
		{"strict, IPv4 device", v4, Route{Mark: 1, Strict: true, Exclude: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, []string{
			"4 9000: not fwmark lookup 2022",
			"4 9001: to 192.168.0.0/16 lookup 254",
			"4 9001: to 172.19.0.0/30 lookup 254",
			"4 9002: not fwmark unreachable",
			"6 9002: not fwmark unreachable", // IPv6 cannot enter the device: refused whole
		}},
		{"strict, route_address", both, Route{Mark: 1, Strict: true, Include: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, []string{
			"4 9000: not fwmark lookup 2022",
			"4 9001: to 172.19.0.0/30 lookup 254",
			"4 9002: not fwmark to 10.0.0.0/8 unreachable",
			"6 9000: not fwmark lookup 2022",
			"6 9001: to fdfe::/126 lookup 254",
		}},
	} {
		cfg := Config{Addresses: tc.addrs, Route: &tc.route}
		if got := ruleLines(cfg); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}
