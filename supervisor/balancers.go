package supervisor

import "switchyard/balancer"

// publishedBalancers is st's balancers by tag, for readers.
func publishedBalancers(st *state) *map[string]*balancer.Balancer {
	m := make(map[string]*balancer.Balancer, len(st.balancers))
	for tag, r := range st.balancers {
		m[tag] = r.bal
	}
	return &m
}

// BalancerStatus reads the published balancer tag's state: its current
// member and each member's health.
func (sv *Supervisor) BalancerStatus(tag string) (balancer.Status, bool) {
	m := sv.balancerPub.Load()
	if m == nil {
		return balancer.Status{}, false
	}
	b, ok := (*m)[tag]
	if !ok || b == nil {
		return balancer.Status{}, false
	}
	return b.Status(), true
}
