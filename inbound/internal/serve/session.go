package serve

import (
	"switchyard/inbound"
	"switchyard/track"
)

// OpenSession opens the session of a connection authenticated as
// info.User, when c keeps sessions. It returns nil (a session that ends
// without effect and has id 0) for an anonymous connection or a connector
// without sessions.
func OpenSession(c inbound.Connector, info track.SessionInfo) *track.Session {
	s, ok := c.(inbound.Sessions)
	if !ok || info.User == "" {
		return nil
	}
	return s.OpenSession(info)
}
