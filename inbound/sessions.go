package inbound

import "switchyard/track"

// Sessions is an ability a Connector may have: it opens the session of an
// authenticated connection. The inbound names the session in every flow of
// the connection (netx.Flow.Session) and ends it when the connection ends.
// An unauthenticated connection has no session.
type Sessions interface {
	OpenSession(track.SessionInfo) *track.Session
}
