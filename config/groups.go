package config

import (
	"fmt"
	"slices"
	"strings"

	"switchyard/spec"
)

// groups lowers [[groups]]. Outbound and balancer tags must already be
// recorded. Group tags are recorded first, all of them, since a member or a
// final may name a group declared further down; rules and [route] are
// checked against them afterwards. Members and finals that make a cycle are
// not refused here: the group manager cuts such edges when it builds, and
// says so.
func (l *lowerer) groups(fs []fileGroup) []spec.Group {
	keys := make([]string, len(fs))
	tags := make([]string, len(fs))
	for i := range fs {
		keys[i] = fmt.Sprintf("groups[%d]", i)
		tags[i] = l.groupTag(keys[i], fs[i].Tag)
	}
	var out []spec.Group
	for i := range fs {
		out = append(out, l.group(keys[i], tags[i], &fs[i]))
	}
	return out
}

// groupTag records the tag of the group at key, and returns it ("" when it
// is missing or empty). Tags of outbounds, balancers and groups share one
// namespace.
func (l *lowerer) groupTag(key string, v *string) string {
	tag, ok := l.required(key+".tag", v)
	if !ok {
		return ""
	}
	const shared = "outbounds, balancers and groups share one namespace"
	switch first, kind := l.declared(tag); {
	case kind == "":
		l.reservedTag(key+".tag", tag)
		l.groupTags[tag] = key + ".tag"
	case kind == "group":
		l.errorf(key+".tag", "duplicate group tag %q (first declared on line %s)", tag, lineOf(first))
	case first == "":
		l.errorf(key+".tag", "duplicate tag %q: the built-in %s outbound has it (%s)", tag, tag, shared)
	default:
		l.errorf(key+".tag", "duplicate tag %q: the %s on line %s has it (%s)", tag, kind, lineOf(first), shared)
	}
	return tag
}

// declared says what has the tag so far: "outbound", "balancer" or "group",
// and the key that declared it ("" for a built-in outbound); kind is ""
// when nothing has it.
func (l *lowerer) declared(tag string) (key, kind string) {
	if k, ok := l.outboundTags[tag]; ok {
		return k, "outbound"
	}
	if _, ok := l.outboundType(tag); ok {
		return "", "outbound"
	}
	if k, ok := l.balancerTags[tag]; ok {
		return k, "balancer"
	}
	if k, ok := l.groupTags[tag]; ok {
		return k, "group"
	}
	return "", ""
}

// group lowers one group whose tag (already recorded) is tag.
func (l *lowerer) group(key, tag string, f *fileGroup) spec.Group {
	g := spec.Group{Tag: tag}
	policy := l.groupPolicy(key+".policy", f.Policy)
	g.Policy = policy

	switch {
	case f.Members == nil && len(f.Use) == 0:
		l.errorf(key+".members", "required key is missing (or use = [\"provider\"] for the nodes of a provider)")
	case len(f.Members) == 0 && len(f.Use) == 0:
		l.errorf(key+".members", "a group needs at least one member")
	}
	seen := map[string]string{}
	eachString(key+".members", f.Members, func(ekey, m string) {
		if first, dup := seen[m]; dup {
			l.errorf(ekey, "duplicate member %q (also %s)", m, first)
			return
		}
		seen[m] = ekey
		switch _, kind := l.declared(m); {
		case kind == "":
			l.errorf(ekey, "unknown member %q: no outbound, balancer or group has this tag", m)
		case kind == "balancer" && policy == "score":
			l.errorf(ekey, "%q is a balancer: a score group ranks the nodes it can name, and a balancer picks its own; list the balancer's outbounds instead", m)
		}
		g.Members = append(g.Members, m)
	})
	l.useProviders(key, f.Use, seen, &g)

	if f.Final != nil {
		switch final := *f.Final; {
		case final == "":
			l.errorf(key+".final", "must not be empty (leave final out for no final)")
		case final == tag:
			l.errorf(key+".final", "a group cannot be its own final")
		default:
			if _, kind := l.declared(final); kind == "" {
				l.errorf(key+".final", "unknown final %q: no outbound, balancer or group has this tag", final)
			}
			g.Final = final
		}
	}
	if f.IdleTimeout != nil && *f.IdleTimeout != "" {
		g.IdleTimeout = l.positiveDuration(key+".idle_timeout", *f.IdleTimeout, `"" for [health].idle_timeout`)
	}
	if f.CheckURL != nil && *f.CheckURL != "" && l.checkURL(key+".check_url", *f.CheckURL) {
		if policy == "selector" {
			l.warnf(key+".check_url", "a selector group does not probe its members: check_url is ignored")
		} else {
			g.CheckURL = *f.CheckURL
		}
	}

	// The rest depends on the policy; without one it cannot be judged.
	if policy == "" {
		return g
	}
	l.foreignGroupKeys(key, policy, f)
	g.Interrupt = defaultInterrupt(policy)
	switch {
	case f.Interrupt == nil:
	case *f.Interrupt && policy == "loadbalance":
		l.warnf(key+".interrupt", "a loadbalance group picks a member per flow and never closes flows: interrupt is ignored")
	case *f.Interrupt && policy == "score":
		l.warnf(key+".interrupt", "a score group picks a member per flow and target and never closes flows: interrupt is ignored")
	default:
		g.Interrupt = *f.Interrupt
	}
	switch policy {
	case "selector":
		if f.Default != nil {
			switch d := *f.Default; {
			case d == "":
				l.errorf(key+".default", "must not be empty (leave default out for the first member)")
			case seen[d] == "":
				l.errorf(key+".default", "%q is not a member of this group", d)
			default:
				g.Default = d
			}
		}
	case "urltest":
		g.Tolerance = defaultTolerance
		if f.Tolerance != nil {
			g.Tolerance = l.nonNegativeDuration(key+".tolerance", *f.Tolerance)
		}
	}
	return g
}

// groupPolicy returns the policy written at key; "" after a problem.
func (l *lowerer) groupPolicy(key string, v *string) string {
	p, ok := l.required(key, v)
	if !ok {
		return ""
	}
	if !l.oneOf(key, p, groupPolicies) {
		return ""
	}
	return p
}

// foreignGroupKeys reports every key written on a group whose policy does
// not take it (a default on a urltest group).
func (l *lowerer) foreignGroupKeys(key, policy string, f *fileGroup) {
	for _, name := range writtenKeys(f) {
		if slices.Contains(everyGroupKeys, name) || slices.Contains(groupKeys[policy], name) {
			continue
		}
		var owners []string
		for _, p := range groupPolicies {
			if slices.Contains(groupKeys[p], name) {
				owners = append(owners, p)
			}
		}
		l.errorf(key+"."+name, "a %s group has no %s (only %s groups have one)", policy, name, strings.Join(owners, " and "))
	}
}
