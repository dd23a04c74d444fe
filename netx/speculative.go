package netx

import (
	"context"
	"net"
)

type speculativeKey struct{}

// WithSpeculative marks the dials run under the returned context as
// speculative: one candidate among several prepared at once (a cold
// URLTest UDP preparation), which may lose and is then cancelled or
// closed. An outbound that shares one session between its flows (a QUIC
// connection, a tunnel) must not publish a session such a dial brings up:
// it keeps it detached, owned by the link it returns, until the link is
// committed (Committer) or closed.
func WithSpeculative(ctx context.Context) context.Context {
	return context.WithValue(ctx, speculativeKey{}, true)
}

// Speculative reports whether ctx carries WithSpeculative's mark.
func Speculative(ctx context.Context) bool {
	v, _ := ctx.Value(speculativeKey{}).(bool)
	return v
}

// A Committer is a link opened by a speculative dial that holds work of
// its own the winner publishes: Commit is called once, on the winner only,
// after its eligibility was checked again, before its first send and
// before anything reads it. ctx bounds what the commit may wait for (it
// ends with the preparation's deadline); a commit that cannot finish in
// time leaves the link working on what it has. A link that holds nothing
// of the kind need not implement it.
type Committer interface {
	Commit(ctx context.Context)
}

// A Carrier is a link or conn that frames what it carries on a conn of
// another layer (a protocol's packet link on its transport's stream).
// Unlike NetConn (Observed), it does not let a relay move bytes on that
// conn directly: it only lets Commit reach the layer that holds the work.
type Carrier interface {
	Carrier() net.Conn
}

// Commit commits l when it is a Committer; a Carrier that is none is
// looked through, a few layers deep, so the commit reaches the transport
// that holds the speculative work. It does nothing when none of them is a
// Committer.
func Commit(ctx context.Context, l any) {
	for range maxCommitDepth {
		if c, ok := l.(Committer); ok {
			c.Commit(ctx)
			return
		}
		w, ok := l.(Carrier)
		if !ok {
			return
		}
		if l = w.Carrier(); l == nil {
			return
		}
	}
}

// maxCommitDepth bounds the wrappers Commit looks through.
const maxCommitDepth = 8
