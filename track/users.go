package track

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// UserConfig is one configured user as the tracker needs it: its name and
// the rates its flows are paced at, in megabits per second (0: unpaced).
type UserConfig struct {
	Name             string
	UpMbps, DownMbps int
}

// UserSnapshot is one configured user as it stands: Up and Down are its
// byte totals since the process started, the wire bytes of every session
// it ever had (ended ones included), and Sessions how many are live.
type UserSnapshot struct {
	Name             string
	UpMbps, DownMbps int
	Up, Down         int64
	Sessions         int
}

// user is a user's entry: its totals, its live session count, and the
// buckets that pace its flows. Sessions and their flows hold the entry, so
// a reload that changes the user's rates reaches every live flow of theirs.
type user struct {
	name             string
	up, down         atomic.Int64
	sessions         atomic.Int64
	upPace, downPace bucket
}

func newUser(name string) *user {
	u := &user{name: name}
	now := time.Now()
	u.upPace.origin, u.downPace.origin = now, now
	return u
}

func (u *user) snapshot() UserSnapshot {
	return UserSnapshot{
		Name:     u.name,
		UpMbps:   u.upPace.mbps(),
		DownMbps: u.downPace.mbps(),
		Up:       u.up.Load(),
		Down:     u.down.Load(),
		Sessions: int(u.sessions.Load()),
	}
}

// users is the table of configured users, published copy-on-write: readers
// load the map and never lock; SetUsers builds the next one. It holds
// exactly the users of the last SetUsers.
type users struct {
	mu  sync.Mutex // serialises SetUsers
	cur atomic.Pointer[map[string]*user]
}

func (us *users) lookup(name string) *user {
	if m := us.cur.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// SetUsers makes cfg the configured users. A user still configured keeps
// its entry, its totals and its live sessions, and its new rates apply at
// once to every flow of theirs, live ones included; a user no longer
// configured leaves the table (its live sessions, if any, keep their entry
// and its last rates until they end); a new user starts from zero.
func (t *Tracker) SetUsers(cfg []UserConfig) {
	us := &t.users
	us.mu.Lock()
	defer us.mu.Unlock()
	next := make(map[string]*user, len(cfg))
	for _, c := range cfg {
		u := us.lookup(c.Name)
		if u == nil {
			u = newUser(c.Name)
		}
		u.upPace.setMbps(c.UpMbps)
		u.downPace.setMbps(c.DownMbps)
		next[c.Name] = u
	}
	us.cur.Store(&next)
}

// Users returns the configured users ordered by name.
func (t *Tracker) Users() []UserSnapshot {
	m := t.users.cur.Load()
	if m == nil {
		return nil
	}
	out := make([]UserSnapshot, 0, len(*m))
	for _, u := range *m {
		out = append(out, u.snapshot())
	}
	slices.SortFunc(out, func(a, b UserSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// User returns the configured user named name.
func (t *Tracker) User(name string) (UserSnapshot, bool) {
	if u := t.users.lookup(name); u != nil {
		return u.snapshot(), true
	}
	return UserSnapshot{}, false
}
