package http

import (
	"net"
	"time"
)

// timed is a conn whose Read and Write each push the matching deadline idle
// into the future first, so that an exchange may last as long as bytes keep
// moving. With idle zero the deadlines are left as they are.
type timed struct {
	net.Conn
	idle time.Duration
}

func (t *timed) Read(b []byte) (int, error) {
	if t.idle > 0 {
		t.Conn.SetReadDeadline(time.Now().Add(t.idle))
	}
	return t.Conn.Read(b)
}

func (t *timed) Write(b []byte) (int, error) {
	if t.idle > 0 {
		t.Conn.SetWriteDeadline(time.Now().Add(t.idle))
	}
	return t.Conn.Write(b)
}
