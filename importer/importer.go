// Package importer converts a Clash / mihomo YAML configuration or a
// sing-box JSON configuration into switchyard's TOML: inbounds, outbounds,
// groups, providers, rule sets, rules and DNS. What it cannot convert is
// returned as a Problem with the line of the input it comes from and why.
// The package reads bytes only: it opens no file or socket and builds no
// outbound; each converted outbound is checked by the loader (config.Parse)
// on its own, so that the output passes switchyard check.
package importer

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"switchyard/config"
	"switchyard/provider"
)

// MaxInput bounds the content Convert reads.
const MaxInput = 32 << 20

// Problem is one thing of the input that was not converted, or was
// converted with a difference the user should know.
type Problem struct {
	Line int    // 1-based line in the input; 0 when unknown
	Item string // what it is about: a key, a proxy or group name, a rule
	Why  string
}

// Format writes the problem as "FILE:LINE: ITEM: WHY".
func (p Problem) Format(file string) string {
	var b strings.Builder
	b.WriteString(file)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Item != "" {
		b.WriteString(p.Item + ": ")
	}
	b.WriteString(p.Why)
	return b.String()
}

// ErrUnknownFormat is returned for content that is neither format.
var ErrUnknownFormat = errors.New("the file is neither a Clash/mihomo YAML configuration nor a sing-box JSON configuration")

// Convert reads content, a Clash/mihomo YAML or a sing-box JSON
// configuration (detected from the content), and returns the equivalent
// switchyard TOML and what could not be converted. name is the input's
// name, written in the output's first comment. An error means the content
// is neither format (ErrUnknownFormat, possibly wrapped with the parser's
// reason).
func Convert(content []byte, name string) ([]byte, []Problem, error) {
	if len(content) > MaxInput {
		return nil, nil, fmt.Errorf("the file is larger than %d MiB", MaxInput>>20)
	}
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf"))
	c := newConv()
	var format string
	if j, ok := jsonText(content); ok {
		root, err := parseJSON(j)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrUnknownFormat, err)
		}
		if !isSingBox(root) {
			return nil, nil, ErrUnknownFormat
		}
		format = "sing-box"
		c.singBox(root)
	} else {
		root, err := parseYAML(content)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrUnknownFormat, err)
		}
		if !isClash(root) {
			return nil, nil, ErrUnknownFormat
		}
		format = "Clash"
		c.clash(root)
	}
	heading := []string{fmt.Sprintf("switchyard configuration imported from %s (a %s configuration) by switchyard import.", clean(name), format)}
	slices.SortStableFunc(c.problems, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
	return c.render(heading), c.problems, nil
}

// clean makes s fit on one comment line.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// conv is one conversion's output, built section by section.
type conv struct {
	problems []Problem

	log, socket, api, health, route, dns, fakeip *table
	inbounds, outbounds, providers, groups       []*table
	ruleSets, rules, dnsRules                    []*table

	taken      map[string]bool     // target tags in use (outbounds, groups)
	targets    map[string]string   // a name in the input -> its target tag
	inTags     map[string]bool     // inbound tags
	provTags   map[string]string   // provider name -> tag
	inlineProv map[string][]string // inline provider name -> its nodes' tags
	inlineSets map[string][][]kv   // inline rule provider name -> its conditions
	sbInline   map[string][]*jnode // sing-box inline rule set tag -> its rules
	setTags    map[string]string   // rule set name -> tag
	dropped    map[string]bool     // names of items not converted
	declared   map[string]bool     // direct and block, when the input declares them
	directTags map[string]bool     // outbounds of type direct
	proxyTags  []string            // tags of the converted proxies, in order
	dnsTags    map[string]bool     // sing-box dns outbounds: hijacking, not outbounds
	hijack     bool                // some rule hijacks DNS: [dns] serve
	geoIP      bool                // some rule reads [route].geoip_path
	later      []func()            // conversions that wait for every group's tag
}

func newConv() *conv {
	return &conv{
		taken:      map[string]bool{"GLOBAL": true, "direct": true, "block": true},
		targets:    map[string]string{},
		dropped:    map[string]bool{},
		dnsTags:    map[string]bool{},
		declared:   map[string]bool{},
		directTags: map[string]bool{},
		inTags:     map[string]bool{},
		provTags:   map[string]string{},
		inlineProv: map[string][]string{},
		inlineSets: map[string][][]kv{},
		sbInline:   map[string][]*jnode{},
		setTags:    map[string]string{},
	}
}

func (c *conv) report(line int, item, format string, args ...any) {
	c.problems = append(c.problems, Problem{Line: line, Item: clean(item), Why: clean(fmt.Sprintf(format, args...))})
}

// tagFor gives the input name a tag of its own among outbounds and
// groups: the name itself, or with the first free numbered suffix when it
// is taken (a reserved tag, or a name met before), reported.
func (c *conv) tagFor(line int, kind, name string) string {
	base := name
	if base == "" {
		base = kind
	}
	tag := provider.Unique(base, c.taken)
	if tag != base {
		if name != "" && (base == "GLOBAL" || base == "direct" || base == "block") {
			c.report(line, kind+" "+strconv.Quote(name), "renamed %q: %q is a tag switchyard reserves", tag, base)
		} else {
			c.report(line, kind+" "+strconv.Quote(name), "renamed %q: the name is used twice", tag)
		}
	}
	return tag
}

// section returns the single table header, made on first use.
func section(t **table, header string) *table {
	if *t == nil {
		*t = &table{header: header}
	}
	return *t
}

// checkOutbound lowers one outbound table on its own with the loader and
// returns its problems as one reason ("" when it is accepted).
func checkOutbound(t *table) string {
	// A ca_file is a file beside the input, which the loader would look
	// for in the working folder: the rest of the table is checked.
	if tl, ok := t.get("tls"); ok {
		if m, ok := tl.(map[string]any); ok && m["ca_file"] != nil {
			cp := &table{header: t.header, array: t.array}
			for _, e := range t.kvs {
				cp.set(e.key, e.val)
			}
			m2 := map[string]any{}
			for k, v := range m {
				if k != "ca_file" {
					m2[k] = v
				}
			}
			cp.set("tls", m2)
			t = cp
		}
	}
	doc := render(nil, []*table{t})
	_, _, err := config.Parse(doc, "import")
	if err == nil {
		return ""
	}
	var errs config.Errors
	if !errors.As(err, &errs) {
		return err.Error()
	}
	var why []string
	for _, e := range errs {
		why = append(why, strings.TrimPrefix(e.Key, "outbounds[0].")+": "+e.Msg)
	}
	return strings.Join(why, "; ")
}

// addOutbound appends the outbound keys o (as provider.Node writes them)
// as the outbound of the input's name, when the loader accepts them, and
// returns its tag; otherwise the item is reported, the name recorded as
// not converted, and ok is false.
func (c *conv) addOutbound(line int, kind, name string, o map[string]any) (string, bool) {
	item := kind + " " + strconv.Quote(name)
	t := &table{header: "outbounds", array: true}
	t.set("tag", "import")
	t.set("type", o["type"])
	for _, k := range []string{"server", "endpoint"} {
		if v, ok := o[k]; ok {
			t.set(k, v)
		}
	}
	for _, k := range sortedKeys(o) {
		if _, ok := t.get(k); !ok {
			t.set(k, o[k])
		}
	}
	if why := checkOutbound(t); why != "" {
		c.drop(line, item, name, "not converted: "+why)
		return "", false
	}
	tag := c.tagFor(line, kind, name)
	t.set("tag", tag)
	c.targets[name] = tag
	c.outbounds = append(c.outbounds, t)
	return tag, true
}

// drop reports an item that is not converted and records its name, so
// that what names it says why it is missing.
func (c *conv) drop(line int, item, name, why string) {
	c.report(line, item, "%s", why)
	if name != "" {
		if _, ok := c.targets[name]; !ok {
			c.dropped[name] = true
		}
	}
}

// target resolves a name the input uses as a route target or member to
// its tag; "" (with a reason) when there is none.
func (c *conv) target(name string) (string, string) {
	if t, ok := c.targets[name]; ok {
		return t, ""
	}
	if c.dropped[name] {
		return "", fmt.Sprintf("%q was not converted (see above)", name)
	}
	return "", fmt.Sprintf("%q is no proxy or group of the file", name)
}

func (c *conv) render(heading []string) []byte {
	if c.hijack && c.dns == nil {
		// DNS hijacking answers with the system resolver, as sing-box's
		// does without a dns section.
		t := section(&c.dns, "dns")
		t.set("servers", []string{"system"})
		t.set("serve", true)
	}
	var ts []*table
	for _, t := range []*table{c.log, c.socket, c.api, c.health} {
		if t != nil {
			ts = append(ts, t)
		}
	}
	ts = append(ts, c.inbounds...)
	if c.dns != nil {
		ts = append(ts, c.dns)
		ts = append(ts, c.dnsRules...)
		if c.fakeip != nil {
			ts = append(ts, c.fakeip)
		}
	}
	ts = append(ts, c.outbounds...)
	ts = append(ts, c.providers...)
	ts = append(ts, c.groups...)
	if c.route != nil {
		ts = append(ts, c.route)
	}
	ts = append(ts, c.ruleSets...)
	ts = append(ts, c.rules...)
	return render(heading, ts)
}
