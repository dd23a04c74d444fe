package config

import "switchyard/spec"

// useProviders appends to g's members the nodes of the providers named in
// use, after members and in each provider's order; a node already a
// member is not added twice. seen holds the members so far.
func (l *lowerer) useProviders(key string, use []string, seen map[string]string, g *spec.Group) {
	if len(use) == 0 {
		return
	}
	used := map[string]bool{}
	problem, pending := false, false
	eachString(key+".use", use, func(ekey, p string) {
		if used[p] {
			l.errorf(ekey, "duplicate provider %q", p)
			problem = true
			return
		}
		used[p] = true
		if _, ok := l.providerTags[p]; !ok {
			l.errorf(ekey, "unknown provider %q: no [[providers]] has this tag", p)
			problem = true
			return
		}
		nodes, loaded := l.providerNodes[p]
		if !loaded { // the provider's own problem is reported
			problem = true
			return
		}
		pending = pending || l.providerPending[p]
		for _, n := range nodes {
			if _, dup := seen[n]; dup {
				continue
			}
			seen[n] = ekey
			g.Members = append(g.Members, n)
		}
	})
	// A group using a url provider not downloaded yet may have no member
	// until the download applies: its flows go to its final, or are
	// refused.
	if !problem && !pending && len(g.Members) == 0 {
		l.errorf(key+".use", "the group has no member: members is empty and the providers in use have no nodes (after filter and exclude_filter)")
	}
}
