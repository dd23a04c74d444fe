package balancer

import "fmt"

// Strategy is how a balancer chooses among its healthy members.
type Strategy uint8

const (
	// Failover takes the first healthy member in configured order: order is
	// the priority, and flows return to a higher member once it recovers.
	Failover Strategy = iota
	// RoundRobin takes each healthy member in turn.
	RoundRobin
)

var strategyNames = [...]string{"failover", "round_robin"}

// String returns the configuration name of s.
func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// ParseStrategy accepts exactly "failover" or "round_robin".
func ParseStrategy(s string) (Strategy, error) {
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), nil
		}
	}
	return Failover, fmt.Errorf("unknown balancer strategy %q (expected \"failover\" or \"round_robin\")", s)
}
