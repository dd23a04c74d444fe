package netx

import "context"

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

// Commit commits l when it is a Committer; it does nothing otherwise.
func Commit(ctx context.Context, l any) {
	if c, ok := l.(Committer); ok {
		c.Commit(ctx)
	}
}
