package ruleset

// keywords is an Aho-Corasick automaton over bytes: one pass of the name
// finds whether any keyword occurs in it. Transitions are stored sparsely,
// sorted by byte, per state.
type keywords struct {
	states []acState
}

type acState struct {
	edges []acEdge
	fail  int32
	out   bool
}

type acEdge struct {
	b  byte
	to int32
}

func (s *acState) next(b byte) int32 {
	for _, e := range s.edges {
		if e.b == b {
			return e.to
		}
	}
	return -1
}

func newKeywords(ws []string) *keywords {
	k := &keywords{states: []acState{{}}}
	for _, w := range ws {
		cur := int32(0)
		for i := 0; i < len(w); i++ {
			n := k.states[cur].next(w[i])
			if n < 0 {
				n = int32(len(k.states))
				k.states = append(k.states, acState{})
				k.states[cur].edges = append(k.states[cur].edges, acEdge{w[i], n})
			}
			cur = n
		}
		k.states[cur].out = true
	}
	// Breadth-first: each state's failure link is the longest proper
	// suffix of its path that is also a path from the root.
	queue := make([]int32, 0, len(k.states))
	for _, e := range k.states[0].edges {
		queue = append(queue, e.to)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range k.states[s].edges {
			f := k.states[s].fail
			for {
				if n := k.states[f].next(e.b); n >= 0 && n != e.to {
					k.states[e.to].fail = n
					break
				}
				if f == 0 {
					k.states[e.to].fail = 0
					break
				}
				f = k.states[f].fail
			}
			if k.states[k.states[e.to].fail].out {
				k.states[e.to].out = true
			}
			queue = append(queue, e.to)
		}
	}
	return k
}

func (k *keywords) match(s string) bool {
	if k.states[0].out { // the empty keyword
		return true
	}
	cur := int32(0)
	for i := 0; i < len(s); i++ {
		for {
			if n := k.states[cur].next(s[i]); n >= 0 {
				cur = n
				break
			}
			if cur == 0 {
				break
			}
			cur = k.states[cur].fail
		}
		if k.states[cur].out {
			return true
		}
	}
	return false
}
