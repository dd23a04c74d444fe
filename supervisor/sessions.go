package supervisor

import (
	"switchyard/inbound"
	"switchyard/spec"
	"switchyard/track"
)

var _ inbound.Sessions = (*connector)(nil)

// OpenSession opens an authenticated connection's session in the tracker.
func (c *connector) OpenSession(info track.SessionInfo) *track.Session {
	return c.tracker.OpenSession(info)
}

// configureUsers hands the tracker the users of s with their rates. A user
// is one name across every inbound (the config refuses two rates for one
// name), so the first entry of each name is taken.
func (sv *Supervisor) configureUsers(s *spec.Spec) {
	var users []track.UserConfig
	seen := map[string]bool{}
	for _, in := range s.Inbounds {
		for _, u := range in.Users {
			if seen[u.Username] {
				continue
			}
			seen[u.Username] = true
			users = append(users, track.UserConfig{Name: u.Username, UpMbps: u.UpMbps, DownMbps: u.DownMbps})
		}
	}
	sv.tracker.SetUsers(users)
}

// sameInbound reports whether a running inbound needs no new server for
// want: only users' rates differ, and those reach live flows through the
// tracker, so changing them keeps every connection.
func sameInbound(running, want spec.Inbound) bool {
	return spec.Equal(withoutRates(running), withoutRates(want))
}

func withoutRates(in spec.Inbound) spec.Inbound {
	if len(in.Users) == 0 {
		return in
	}
	users := make([]spec.User, len(in.Users))
	for i, u := range in.Users {
		u.UpMbps, u.DownMbps = 0, 0
		users[i] = u
	}
	in.Users = users
	return in
}
