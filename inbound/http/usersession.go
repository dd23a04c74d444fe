package http

import (
	"switchyard/inbound/internal/serve"
	"switchyard/track"
)

// A client connection becomes a session of its user with its first
// authenticated request, and its flows (tunnels, origin connections) are
// filed under it. Every request carries its own Proxy-Authorization, so a
// later request may authenticate as another user: the connection's session
// then ends and one of that user begins. Without users configured there is
// no session.

// enter makes the connection a session of user, unless it is one already.
func (ss *session) enter(user string) {
	if user == "" || ss.us.Info().User == user {
		return
	}
	ss.leave()
	ss.us = serve.OpenSession(ss.s.conn, track.SessionInfo{User: user, Inbound: ss.s.cfg.Tag, Source: ss.src})
}

// leave ends the connection's session, if it has one.
func (ss *session) leave() {
	ss.us.End()
	ss.us = nil
}
