package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnknownNode is returned for an ID Sync did not register, ErrNoProber
// for a node registered without a Prober.
var (
	ErrUnknownNode = errors.New("node not registered")
	ErrNoProber    = errors.New("node has no prober")
)

// DelayResult is the outcome of one node's delay test.
type DelayResult struct {
	ID     NodeID
	Result Result
	Err    error
}

// ProbeNow runs one full cycle of the nodes ids (every registered node when
// none is given) and waits for it: the TCP probe, the UDP probe of UDP
// nodes when UDP probing is configured, and the check_urls whose current
// leaf is among them (the set is refreshed from URLTargets first). Idling,
// cooldowns and the grace do not apply: failures count. The probes share
// the MaxConcurrentProbes bound. Used by the CLI `switchyard probe`; it
// needs no Start, and returns at once after Stop.
func (e *Engine) ProbeNow(ctx context.Context, ids ...NodeID) {
	ctx, cancel := e.join(ctx)
	defer cancel()
	reg := *e.reg.Load()
	var nodes []*node
	want := make(map[NodeID]bool, len(ids))
	if len(ids) == 0 {
		for _, n := range reg {
			nodes = append(nodes, n)
			want[n.id] = true
		}
	}
	for _, id := range ids {
		if n := reg[id]; n != nil && !want[id] {
			nodes = append(nodes, n)
			want[id] = true
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, n := range nodes {
		e.submit(ctx, &wg, func(ctx context.Context) { e.probeTCP(ctx, n, true) })
		if e.hasUDP(n) {
			e.submitUDP(ctx, &wg, n, true, nil)
		}
	}
	for _, u := range e.refreshURLs() {
		if want[u.leafID()] {
			e.submit(ctx, &wg, func(ctx context.Context) { e.probeURL(ctx, u, true) })
		}
	}
}

// Delay runs an explicit delay test of node id (the API's): HEAD to url
// (DefaultDelayURL when empty) through the node, bounded by timeout
// (CheckTimeout when 0), sharing the MaxConcurrentProbes bound. The outcome
// is recorded like a probe of the node's TCP state, a failure counting
// even in the grace; a cancelled test records nothing.
func (e *Engine) Delay(ctx context.Context, id NodeID, url string, timeout time.Duration) (Result, error) {
	n := e.node(id)
	if n == nil {
		return Result{}, fmt.Errorf("delay test of %s: %w", id, ErrUnknownNode)
	}
	m := n.meta.Load()
	if m.prober == nil {
		return Result{}, fmt.Errorf("delay test of %s: %w", m.name, ErrNoProber)
	}
	if url == "" {
		url = DefaultDelayURL
	}
	if timeout <= 0 {
		timeout = e.timeout
	}
	ctx, cancel := e.join(ctx)
	defer cancel()
	select {
	case e.run.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { <-e.run.sem }()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	pctx, pcancel := e.withTimeout(ctx, timeout)
	res, err := m.prober.TCP(pctx, url, DelayMethod)
	pcancel()
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	e.recordTCP(n, res, err, true)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// DelayMany runs the delay tests of ids, at most DelayConcurrency at a
// time, and returns their outcomes in the order of ids.
func (e *Engine) DelayMany(ctx context.Context, ids []NodeID, url string, timeout time.Duration) []DelayResult {
	out := make([]DelayResult, len(ids))
	sem := make(chan struct{}, DelayConcurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		out[i].ID = id
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i].Err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() {
				<-sem
				wg.Done()
			}()
			out[i].Result, out[i].Err = e.Delay(ctx, id, url, timeout)
		}()
	}
	wg.Wait()
	return out
}
