package importer

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// privateCIDRs are the networks mihomo's GEOIP,LAN and sing-box's
// ip_is_private stand for.
var privateCIDRs = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "255.255.255.255/32",
	"::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
}

// addRule appends a [[rules]] table of keys and outbound. A rule whose one
// key is the one key of the rule before it, to the same outbound, joins it
// (a list inside a key is OR: the two match what they matched apart).
func (c *conv) addRule(keys []kv, outbound string) {
	if n := len(c.rules); n > 0 && len(keys) == 1 {
		prev := c.rules[n-1]
		if len(prev.kvs) == 2 && prev.kvs[0].key == keys[0].key && prev.kvs[1].val == outbound {
			if merged, ok := joinLists(prev.kvs[0].val, keys[0].val); ok {
				prev.kvs[0].val = merged
				return
			}
		}
	}
	t := &table{header: "rules", array: true}
	for _, e := range keys {
		t.set(e.key, e.val)
	}
	t.set("outbound", outbound)
	c.rules = append(c.rules, t)
}

func joinLists(a, b any) (any, bool) {
	switch a := a.(type) {
	case []string:
		if b, ok := b.([]string); ok {
			return append(slices.Clip(a), b...), true
		}
	case []int64:
		if b, ok := b.([]int64); ok {
			return append(slices.Clip(a), b...), true
		}
	}
	return nil, false
}

// prefix reads an IP prefix or a bare address, canonical.
func prefix(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return "", fmt.Errorf("%q is not an IP prefix", s)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String(), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Addr().Zone() != "" {
		return "", fmt.Errorf("%q is not an IP prefix", s)
	}
	return p.Masked().String(), nil
}

// ports reads Clash's port list: "443", "1000-2000", or several joined by
// "/" (mihomo).
func ports(s string) (single []int64, ranges []string, err error) {
	for _, part := range strings.Split(s, "/") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
		if !isRange {
			if err1 != nil {
				return nil, nil, fmt.Errorf("%q is not a port", part)
			}
			single = append(single, int64(a))
			continue
		}
		b, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
		if err1 != nil || err2 != nil || a > b {
			return nil, nil, fmt.Errorf("%q is not a port range", part)
		}
		ranges = append(ranges, fmt.Sprintf("%d:%d", a, b))
	}
	return single, ranges, nil
}

// wildcardRegex writes a mihomo DOMAIN-WILDCARD pattern ("*" one label
// or part of one, "?" one character) as a regular expression.
func wildcardRegex(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range strings.ToLower(p) {
		switch r {
		case '*':
			b.WriteString(`[^.]*`)
		case '?':
			b.WriteString(`[^.]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// validRegex says why a domain_regex would be refused ("" when it is
// accepted).
func validRegex(s string) string {
	if _, err := regexp.Compile(s); err != nil {
		return fmt.Sprintf("bad regular expression %q: %s", s, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return ""
}

// duration writes n units of unit as a Go duration string; "" for 0 or
// less. Seconds are written in the largest whole unit ("1h", "5m").
func duration(n int64, unit string) string {
	if n <= 0 {
		return ""
	}
	if unit == "s" {
		switch {
		case n%3600 == 0:
			n, unit = n/3600, "h"
		case n%60 == 0:
			n, unit = n/60, "m"
		}
	}
	return strconv.FormatInt(n, 10) + unit
}
