package config

import "switchyard/spec"

// userRate is where a user's rates were first written, and what they are.
type userRate struct {
	key      string
	up, down int
}

// userRates lowers the pacing rates of the users entry at key into u. A
// user is one name across every inbound (its byte totals and its pacing are
// shared by all its sessions), so a name written on two inbounds must carry
// the same rates on both.
func (l *lowerer) userRates(key string, u spec.User, f fileUser) spec.User {
	u.UpMbps = l.mbps(key+".up_mbps", f.UpMbps)
	u.DownMbps = l.mbps(key+".down_mbps", f.DownMbps)
	if l.rates == nil {
		l.rates = map[string]userRate{}
	}
	first, seen := l.rates[u.Username]
	switch {
	case !seen:
		l.rates[u.Username] = userRate{key: key, up: u.UpMbps, down: u.DownMbps}
	case first.up != u.UpMbps || first.down != u.DownMbps:
		l.errorf(key, "user %q is paced at up_mbps = %d, down_mbps = %d on line %s: a user's rates are the same on every inbound",
			u.Username, first.up, first.down, lineOf(first.key))
	}
	return u
}
