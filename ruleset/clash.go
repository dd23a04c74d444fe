package ruleset

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"switchyard/netx"
)

// clashEntries calls fn with each entry of a Clash rule-provider file,
// in the text form (one entry a line) or the YAML form (a "payload:"
// list), and its line number. Empty lines and comments are skipped.
func clashEntries(data []byte, fn func(line int, text string) error) error {
	yaml, seen := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' || strings.HasPrefix(t, "//") {
			continue
		}
		if !yaml && !seen && t == "payload:" {
			yaml = true
			continue
		}
		if yaml {
			v, ok := strings.CutPrefix(t, "-")
			if !ok {
				return errAt(line, "%q is not a list item of payload (\"- value\")", clip(t))
			}
			v = strings.TrimSpace(v)
			if i := strings.Index(v, " #"); i >= 0 && v[0] != '\'' && v[0] != '"' {
				v = strings.TrimSpace(v[:i])
			}
			uq, err := unquoteYAML(v)
			if err != nil {
				return errAt(line, "%s", err)
			}
			t = uq
		}
		if t == "" {
			return errAt(line, "empty entry")
		}
		seen = true
		if err := fn(line, t); err != nil {
			return errAt(line, "%s", err)
		}
	}
	if err := sc.Err(); err != nil {
		return errAt(line+1, "%s", err)
	}
	return nil
}

type textError string

func (e textError) Error() string { return string(e) }

func unquoteYAML(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", textError("unterminated single-quoted value " + strconv.Quote(clip(v)))
		}
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	case '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", textError("bad double-quoted value " + strconv.Quote(clip(v)))
		}
		return s, nil
	}
	return v, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// parseClashDomain reads a Clash "domain" rule provider: "+.x" is x and
// every name under it, ".x" the names under x only, "*.x" the names one
// label under x, a "*" elsewhere one label, anything else the exact name.
// Each entry goes straight into the set's names.
func parseClashDomain(data []byte, c *compiler) error {
	return clashEntries(data, func(line int, text string) error {
		h := headless{line: line}
		if err := (wildcards{}).add(&h, text); err != nil {
			return err
		}
		c.add(&h)
		return nil
	})
}

type wildcards struct{}

func (wildcards) add(h *headless, s string) error {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	switch {
	case strings.HasPrefix(s, "+."):
		if err := checkName(s[2:]); err != nil {
			return err
		}
		h.domainSuffix = append(h.domainSuffix, s[2:])
	case strings.HasPrefix(s, "*.") && !strings.Contains(s[2:], "*"):
		if err := checkName(s[2:]); err != nil {
			return err
		}
		h.oneLabel = append(h.oneLabel, s[2:])
	case strings.HasPrefix(s, "."):
		if err := checkName(s[1:]); err != nil {
			return err
		}
		h.subdomains = append(h.subdomains, s[1:])
	case strings.Contains(s, "*"):
		labels := strings.Split(s, ".")
		for i, l := range labels {
			if l == "*" {
				labels[i] = "[^.]+"
			} else if strings.Contains(l, "*") {
				return textError("a \"*\" must be a whole label: " + strconv.Quote(s))
			} else {
				labels[i] = regexp.QuoteMeta(l)
			}
		}
		h.domainRegex = append(h.domainRegex, regexp.MustCompile("^"+strings.Join(labels, `\.`)+"$"))
	default:
		if err := checkName(s); err != nil {
			return err
		}
		h.domain = append(h.domain, s)
	}
	return nil
}

// checkName refuses what cannot be a domain name: empty labels, spaces,
// commas (a classical rule given to a domain provider).
func checkName(s string) error {
	if s == "" {
		return textError("empty domain name")
	}
	if strings.ContainsAny(s, " ,\t/") || strings.Contains(s, "..") {
		return textError(strconv.Quote(clip(s)) + " is not a domain name")
	}
	return nil
}

// parseClashIPCIDR reads a Clash "ipcidr" rule provider: one prefix (or
// address) an entry.
func parseClashIPCIDR(data []byte, c *compiler) error {
	return clashEntries(data, func(line int, text string) error {
		p, ok := ParsePrefix(text)
		if !ok {
			return textError(strconv.Quote(clip(text)) + " is not an IP prefix or address")
		}
		c.ips.add(p)
		c.entries++
		return nil
	})
}

// parseClashClassical reads a Clash "classical" rule provider: one rule a
// line, "TYPE,VALUE[,no-resolve]" or a logical "AND,((...),(...))",
// "OR,((...),(...))", "NOT,((...))", without a target.
func parseClashClassical(data []byte, c *compiler) error {
	return clashEntries(data, func(line int, text string) error {
		h, err := classicalRule(text, 0)
		if err != nil {
			return err
		}
		h.line = line
		c.add(&h)
		return nil
	})
}

func classicalRule(s string, depth int) (headless, error) {
	var h headless
	if typ, rest, ok := strings.Cut(s, ","); ok {
		switch t := strings.ToUpper(strings.TrimSpace(typ)); t {
		case "AND", "OR", "NOT":
			return clashLogical(t, strings.TrimSpace(rest), depth)
		}
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if len(parts) < 2 {
		return h, textError(strconv.Quote(clip(s)) + " is not a rule \"TYPE,VALUE\"")
	}
	typ, v := strings.ToUpper(parts[0]), parts[1]
	for _, opt := range parts[2:] {
		if opt != "no-resolve" && opt != "src" {
			return h, textError("unknown option " + strconv.Quote(opt) + " in " + strconv.Quote(clip(s)))
		}
	}
	switch typ {
	case "DOMAIN":
		if err := checkName(v); err != nil {
			return h, err
		}
		h.domain = []string{strings.ToLower(v)}
	case "DOMAIN-SUFFIX":
		v = strings.TrimPrefix(v, ".")
		if err := checkName(v); err != nil {
			return h, err
		}
		h.domainSuffix = []string{strings.ToLower(v)}
	case "DOMAIN-KEYWORD":
		if v == "" {
			return h, textError("empty keyword")
		}
		h.domainKeyword = []string{strings.ToLower(v)}
	case "DOMAIN-REGEX":
		re, err := regexp.Compile(v)
		if err != nil {
			return h, textError("bad regex " + strconv.Quote(v) + ": " + strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		h.domainRegex = []*regexp.Regexp{re}
	case "DOMAIN-WILDCARD":
		if err := (wildcards{}).add(&h, v); err != nil {
			return h, err
		}
	case "IP-CIDR", "IP-CIDR6", "SRC-IP-CIDR":
		p, ok := ParsePrefix(v)
		if !ok {
			return h, textError(strconv.Quote(v) + " is not an IP prefix")
		}
		if typ == "SRC-IP-CIDR" {
			h.srcCIDR = []netip.Prefix{p}
		} else {
			h.ipCIDR = []netip.Prefix{p}
		}
	case "DST-PORT", "SRC-PORT":
		ps, rs, err := clashPorts(v)
		if err != nil {
			return h, err
		}
		if typ == "DST-PORT" {
			h.port, h.portRange = ps, rs
		} else {
			h.srcPort, h.srcPortRange = ps, rs
		}
	case "NETWORK":
		switch strings.ToLower(v) {
		case "tcp":
			h.network = []netx.Network{netx.TCP}
		case "udp":
			h.network = []netx.Network{netx.UDP}
		default:
			return h, textError("network " + strconv.Quote(v) + " is not tcp or udp")
		}
	default:
		return h, textError("rule type " + strconv.Quote(parts[0]) + " is not one switchyard matches in a rule set " +
			"(DOMAIN, DOMAIN-SUFFIX, DOMAIN-KEYWORD, DOMAIN-REGEX, DOMAIN-WILDCARD, IP-CIDR, IP-CIDR6, SRC-IP-CIDR, DST-PORT, SRC-PORT, " +
			"NETWORK, AND, OR, NOT)" + whyNotClash(typ))
	}
	return h, nil
}

// whyNotClash says why a Clash rule type is not matched in a rule set.
func whyNotClash(typ string) string {
	switch typ {
	case "PROCESS-NAME", "PROCESS-PATH", "PROCESS-NAME-REGEX", "PROCESS-PATH-REGEX", "UID":
		return ": switchyard does not look up the process that opened a connection"
	case "GEOSITE":
		return ": geosite databases are not read; use the list as a rule set of its own (a sing-box .srs or a Clash domain list)"
	case "GEOIP", "SRC-GEOIP", "IP-ASN", "SRC-IP-ASN":
		return ": a rule set holds no database; use a rule's geoip key, or the list's CIDRs as an ipcidr rule set"
	case "RULE-SET", "SUB-RULE":
		return ": a rule set cannot name another"
	case "MATCH":
		return ": a rule set has no final rule; the route's final outbound is that"
	case "IN-PORT", "IN-TYPE", "IN-USER", "IN-NAME":
		return ": a rule set does not match inbounds; use a rule's inbound key"
	case "DSCP", "IP-SUFFIX", "SRC-IP-SUFFIX":
		return ": not read by switchyard"
	}
	return ""
}

// clashLogical reads the payload of a Clash logical rule:
// "((RULE),(RULE),...)", each RULE a classical rule (logical ones too),
// then no option but no-resolve or src.
func clashLogical(typ, payload string, depth int) (headless, error) {
	if depth >= maxDepth {
		return headless{}, textError(fmt.Sprintf("logical rules nested more than %d deep", maxDepth))
	}
	if !strings.HasPrefix(payload, "(") {
		return headless{}, textError(typ + " needs its rules in parentheses: " + typ + ",((RULE),(RULE))")
	}
	end := closing(payload, 0)
	if end < 0 {
		return headless{}, textError("unbalanced parentheses in " + strconv.Quote(clip(payload)))
	}
	for _, opt := range strings.Split(payload[end+1:], ",")[1:] {
		if o := strings.TrimSpace(opt); o != "no-resolve" && o != "src" {
			return headless{}, textError("unknown option " + strconv.Quote(o) + " after " + typ + "'s rules")
		}
	}
	if rest := strings.TrimSpace(payload[end+1:]); rest != "" && rest[0] != ',' {
		return headless{}, textError(strconv.Quote(clip(rest)) + " after " + typ + "'s rules")
	}
	inner := payload[1:end]
	l := &logical{and: typ != "OR", invert: typ == "NOT"}
	for i := 0; i < len(inner); {
		switch inner[i] {
		case ' ', '\t', ',':
			i++
			continue
		case '(':
		default:
			return headless{}, textError(typ + ": each rule is in parentheses, at " + strconv.Quote(clip(inner[i:])))
		}
		j := closing(inner, i)
		if j < 0 {
			return headless{}, textError("unbalanced parentheses in " + strconv.Quote(clip(inner[i:])))
		}
		sub, err := classicalRule(strings.TrimSpace(inner[i+1:j]), depth+1)
		if err != nil {
			return headless{}, textError(typ + ": " + err.Error())
		}
		l.rules = append(l.rules, sub)
		i = j + 1
	}
	switch {
	case len(l.rules) == 0:
		return headless{}, textError(typ + " without rules")
	case typ == "NOT" && len(l.rules) != 1:
		return headless{}, textError(fmt.Sprintf("NOT takes one rule, not %d", len(l.rules)))
	}
	return headless{logical: l}, nil
}

// closing is the index of the parenthesis closing the one at s[i], or -1.
func closing(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// clashPorts reads "443", "1000-2000" or "80/443/8000-9000".
func clashPorts(v string) ([]uint16, []portRange, error) {
	var ps []uint16
	var rs []portRange
	for _, p := range strings.Split(v, "/") {
		lo, hi, isRange := strings.Cut(p, "-")
		a, errA := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
		if !isRange {
			if errA != nil {
				return nil, nil, textError(strconv.Quote(p) + " is not a port 0..65535")
			}
			ps = append(ps, uint16(a))
			continue
		}
		b, errB := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
		if errA != nil || errB != nil || a > b {
			return nil, nil, textError(strconv.Quote(p) + " is not a port range low-high of ports 0..65535")
		}
		rs = append(rs, portRange{uint16(a), uint16(b)})
	}
	return ps, rs, nil
}

// ParsePrefix reads a prefix or a bare address, masked, an IPv4-mapped
// prefix in its IPv4 form.
func ParsePrefix(s string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, false
		}
	} else {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(ip, ip.BitLen())
	}
	if ip := p.Addr(); ip.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(ip.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}
