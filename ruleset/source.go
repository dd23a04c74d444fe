package ruleset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"switchyard/netx"
)

// sourceVersionMax is the newest sing-box source rule-set version read
// (sing-box 1.14 writes up to 5; the keys switchyard matches are those of
// versions 1 to 3, unchanged since).
const sourceVersionMax = 5

// parseSource reads a sing-box source rule set:
// {"version": N, "rules": [headless rule, ...]}.
func parseSource(data []byte, c *compiler) error {
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fail := func(off int64, format string, args ...any) error {
		return errAt(lines.line(off), format, args...)
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fail(se.Offset, "%s", se.Error())
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(int64(len(data)), "unexpected end of the file")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fail(te.Offset, "%s", te.Error())
		}
		return fail(dec.InputOffset(), "%s", err)
	}
	if t, err := dec.Token(); err != nil {
		return syntax(err)
	} else if d, ok := t.(json.Delim); !ok || d != '{' {
		return fail(0, "a source rule set is a JSON object {\"version\": N, \"rules\": [...]}")
	}
	version, sawRules := 0, false
	for dec.More() {
		off := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		key, _ := t.(string)
		switch key {
		case "version":
			var n json.Number
			if err := dec.Decode(&n); err != nil {
				return syntax(err)
			}
			v, err := strconv.Atoi(n.String())
			if err != nil || v < 1 || v > sourceVersionMax {
				return fail(off, "version %s is not a sing-box rule-set version 1..%d", n, sourceVersionMax)
			}
			version = v
		case "rules":
			sawRules = true
			if t, err := dec.Token(); err != nil {
				return syntax(err)
			} else if d, ok := t.(json.Delim); !ok || d != '[' {
				return fail(off, "rules must be a list")
			}
			for i := 0; dec.More(); i++ {
				start := dec.InputOffset()
				var raw map[string]json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return syntax(err)
				}
				h, err := sourceRule(raw, 0)
				line := lines.line(start + int64(countSpace(data[start:])))
				if err != nil {
					return errAt(line, "rules[%d]%s", i, err)
				}
				h.line = line
				c.add(&h)
			}
			if _, err := dec.Token(); err != nil {
				return syntax(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return syntax(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	if version == 0 {
		return fail(0, "the version key is missing")
	}
	if !sawRules {
		return fail(0, "the rules key is missing")
	}
	return nil
}

func countSpace(b []byte) int {
	n := 0
	for n < len(b) && (b[n] == ' ' || b[n] == '\n' || b[n] == '\r' || b[n] == '\t' || b[n] == ',') {
		n++
	}
	return n
}

// sourceRule converts one headless rule at nesting depth. sing-box lets
// a list key be one string instead of a list. An error starts with the
// path to the key (": ..." at the rule itself, ".rules[1]: ..." in one of
// a logical rule's rules).
func sourceRule(raw map[string]json.RawMessage, depth int) (headless, error) {
	var h headless
	if t, ok := raw["type"]; ok {
		var typ string
		if err := json.Unmarshal(t, &typ); err != nil {
			return h, fmt.Errorf(": type: %s", err)
		}
		switch typ {
		case "", "default":
		case "logical":
			return logicalRule(raw, depth)
		default:
			return h, fmt.Errorf(": unknown rule type %q (default or logical)", typ)
		}
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		var err error
		switch k {
		case "type":
		case "invert":
			err = json.Unmarshal(v, &h.invert)
		case "domain":
			h.domain, err = names(v)
		case "domain_suffix":
			// sing-box: ".x" is the names under x; "x" is x and those.
			var ss []string
			if ss, err = names(v); err == nil {
				for _, s := range ss {
					if sub, ok := strings.CutPrefix(s, "."); ok && sub != "" {
						h.subdomains = append(h.subdomains, sub)
					} else {
						h.domainSuffix = append(h.domainSuffix, s)
					}
				}
			}
		case "domain_keyword":
			h.domainKeyword, err = names(v)
		case "domain_regex":
			var ss []string
			if ss, err = listable(v); err == nil {
				for _, s := range ss {
					re, rerr := regexp.Compile(s)
					if rerr != nil {
						return h, fmt.Errorf(": domain_regex %q: %s", s, strings.TrimPrefix(rerr.Error(), "error parsing regexp: "))
					}
					h.domainRegex = append(h.domainRegex, re)
				}
			}
		case "ip_cidr":
			h.ipCIDR, err = prefixes(v)
		case "source_ip_cidr":
			h.srcCIDR, err = prefixes(v)
		case "port":
			h.port, err = portList(v)
		case "source_port":
			h.srcPort, err = portList(v)
		case "port_range":
			h.portRange, err = rangeList(v)
		case "source_port_range":
			h.srcPortRange, err = rangeList(v)
		case "network":
			var ss []string
			if ss, err = listable(v); err == nil {
				for _, s := range ss {
					switch s {
					case "tcp":
						h.network = append(h.network, netx.TCP)
					case "udp":
						h.network = append(h.network, netx.UDP)
					default:
						return h, fmt.Errorf(": network %q is not tcp or udp", s)
					}
				}
			}
		default:
			return h, fmt.Errorf(": key %q is not one switchyard matches in a rule set (domain, domain_suffix, domain_keyword, "+
				"domain_regex, ip_cidr, source_ip_cidr, port, port_range, source_port, source_port_range, network, invert; "+
				"or type \"logical\" with mode, rules and invert)%s", k, whyNot(k))
		}
		if err != nil {
			return h, fmt.Errorf(": %s: %s", k, err)
		}
	}
	if !h.conditions() {
		return h, errors.New(": a rule without conditions (sing-box refuses it too: \"missing conditions\")")
	}
	return h, nil
}

// logicalRule converts a rule of type "logical": mode "and" or "or",
// rules (default or logical, nested up to maxDepth), invert.
func logicalRule(raw map[string]json.RawMessage, depth int) (headless, error) {
	if depth >= maxDepth {
		return headless{}, fmt.Errorf(": logical rules nested more than %d deep", maxDepth)
	}
	l := &logical{}
	var mode string
	if v, ok := raw["mode"]; !ok {
		return headless{}, errors.New(`: a logical rule needs a mode ("and" or "or")`)
	} else if err := json.Unmarshal(v, &mode); err != nil || (mode != "and" && mode != "or") {
		return headless{}, fmt.Errorf(`: mode %s is not "and" or "or"`, v)
	}
	l.and = mode == "and"
	var subs []map[string]json.RawMessage
	if v, ok := raw["rules"]; !ok {
		return headless{}, errors.New(": a logical rule needs rules")
	} else if err := json.Unmarshal(v, &subs); err != nil {
		return headless{}, errors.New(": rules must be a list of rules")
	}
	if len(subs) == 0 {
		return headless{}, errors.New(": a logical rule needs at least one rule")
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "type", "mode", "rules":
		case "invert":
			if err := json.Unmarshal(raw[k], &l.invert); err != nil {
				return headless{}, fmt.Errorf(": invert: %s", err)
			}
		default:
			return headless{}, fmt.Errorf(": key %q is not one of a logical rule (type, mode, rules, invert)", k)
		}
	}
	for i, sub := range subs {
		h, err := sourceRule(sub, depth+1)
		if err != nil {
			return headless{}, fmt.Errorf(".rules[%d]%s", i, err)
		}
		l.rules = append(l.rules, h)
	}
	return headless{logical: l}, nil
}

// whyNot says why a sing-box rule key a rule set may hold is not
// matched: it names what the router cannot see.
func whyNot(k string) string {
	switch k {
	case "process_name", "process_path", "process_path_regex", "package_name", "package_name_regex":
		return ": switchyard does not look up the process that opened a connection"
	case "wifi_ssid", "wifi_bssid", "network_type", "network_is_expensive", "network_is_constrained",
		"network_interface_address", "default_interface_address":
		return ": switchyard does not read the host's network state"
	case "query_type":
		return ": a query type is a DNS rule's, not a rule set's here"
	case "adguard_domain":
		return ": AdGuard filter syntax is not read"
	}
	return ""
}

func listable(v json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(v, &many); err != nil {
		return nil, errors.New("must be a string or a list of strings")
	}
	return many, nil
}

func names(v json.RawMessage) ([]string, error) {
	ss, err := listable(v)
	if err != nil {
		return nil, err
	}
	for i, s := range ss {
		s = strings.ToLower(strings.TrimSuffix(s, "."))
		if s == "" || s == "." {
			return nil, errors.New("empty name")
		}
		ss[i] = s
	}
	return ss, nil
}

func prefixes(v json.RawMessage) ([]netip.Prefix, error) {
	ss, err := listable(v)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		p, ok := ParsePrefix(s)
		if !ok {
			return nil, fmt.Errorf("%q is not an IP prefix or address", s)
		}
		out = append(out, p)
	}
	return out, nil
}

func portList(v json.RawMessage) ([]uint16, error) {
	var one uint16
	if err := json.Unmarshal(v, &one); err == nil {
		return []uint16{one}, nil
	}
	var many []uint16
	if err := json.Unmarshal(v, &many); err != nil {
		return nil, errors.New("must be a port 0..65535 or a list of ports")
	}
	return many, nil
}

// rangeList reads sing-box port ranges: "1000:2000", ":2000", "1000:".
func rangeList(v json.RawMessage) ([]portRange, error) {
	ss, err := listable(v)
	if err != nil {
		return nil, err
	}
	out := make([]portRange, 0, len(ss))
	for _, s := range ss {
		lo, hi, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("%q is not a port range \"low:high\"", s)
		}
		r := portRange{0, 65535}
		if lo != "" {
			n, err := strconv.ParseUint(lo, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%q is not a port range \"low:high\"", s)
			}
			r.lo = uint16(n)
		}
		if hi != "" {
			n, err := strconv.ParseUint(hi, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%q is not a port range \"low:high\"", s)
			}
			r.hi = uint16(n)
		}
		if r.lo > r.hi {
			return nil, fmt.Errorf("%q: the low port is above the high port", s)
		}
		out = append(out, r)
	}
	return out, nil
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int64

func newLineIndex(data []byte) lineIndex {
	idx := lineIndex{0}
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, int64(i+1))
		}
	}
	return idx
}

func (l lineIndex) line(off int64) int {
	return sort.Search(len(l), func(i int) bool { return l[i] > off })
}
