package dns

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
)

// DefaultTimeout bounds one exchange with one server.
const DefaultTimeout = 5 * time.Second

// maxFlights is the number of distinct questions a resolver asks its
// servers at once; a question beyond it waits for one to finish.
const maxFlights = 1024

// ednsSize is the UDP payload size queries advertise: the size that avoids
// fragmentation on the common paths (DNS flag day 2020).
const ednsSize = 1232

// failurePenalty is how long a server whose exchange failed is asked after
// the others, so that a dead first server costs a timeout once, not on
// every question.
const failurePenalty = 30 * time.Second

// Options configure a resolver and its server clients.
type Options struct {
	Name string // for stats and logs
	// Dialer opens every query socket; nil: PolicyDialer under an empty
	// socket policy.
	Dialer Dialer
	// Bootstrap resolves servers given by name; nil: the system resolver.
	Bootstrap netx.Resolver
	// RootCAs verifies tls and https servers; nil: the system roots.
	RootCAs *x509.CertPool
	// Timeout bounds one exchange with one server; 0: DefaultTimeout.
	Timeout time.Duration
	// Cache is shared with other resolvers; nil: a cache of its own with
	// the bounds below.
	Cache          *Cache
	CacheSize      int
	MinTTL, MaxTTL time.Duration
	Now            func() time.Time // the cache's clock; nil: time.Now
	Logger         *slog.Logger     // nil: discarded
}

func (o Options) withDefaults() Options {
	if o.Dialer == nil {
		o.Dialer = PolicyDialer(netx.NewDialer(netx.SocketPolicy{}, 0))
	}
	if o.Bootstrap == nil {
		o.Bootstrap = netx.SystemResolver{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// The errors of a question without an answer. LookupIP errors wrap one of
// them (or a transport error, or ErrBlocked from a Router).
var (
	ErrNXDomain = errors.New("no such domain (NXDOMAIN)")
	// ErrServerFailure: every server failed or answered SERVFAIL, REFUSED
	// or another error code.
	ErrServerFailure = errors.New("no server gave a usable answer")
	// ErrBadQuery: a query that is not one question.
	ErrBadQuery = errors.New("a query has exactly one question")
)

// nameError is the error of a question about a name.
type nameError struct {
	name string
	what string // the type or "" for both families
	err  error
}

func (e *nameError) Error() string {
	if e.what != "" {
		return "dns: " + e.name + " " + e.what + ": " + e.err.Error()
	}
	return "dns: " + e.name + ": " + e.err.Error()
}
func (e *nameError) Unwrap() error { return e.err }

var resolverIDs atomic.Uint32

// Resolver asks its servers in order and caches their answers. It
// implements netx.Resolver and netx.TTLResolver, and Exchange for the DNS
// service. Concurrent identical questions share one exchange, run on a
// goroutine the resolver owns: Close ends them and releases the servers'
// connections.
type Resolver struct {
	id      uint32
	name    string
	clients []*Client
	stats   []serverCounters // by client
	cache   *Cache
	timeout time.Duration
	log     *slog.Logger
	count   resolverCounters

	ctx    context.Context // of the exchanges; cancelled by Close
	cancel context.CancelFunc
	slots  chan struct{} // one per question in flight

	mu      sync.Mutex // guards flights and closed
	flights map[cacheKey]*flight
	closed  bool
	wg      sync.WaitGroup // the flights' goroutines
}

// flight is one question being asked of the servers.
type flight struct {
	done chan struct{} // closed once e or err is set
	e    *entry
	err  error
}

// New returns a resolver asking servers, in order. It opens no socket.
func New(servers []Server, o Options) *Resolver {
	o = o.withDefaults()
	cache := o.Cache
	if cache == nil {
		cache = NewCache(CacheOptions{Size: o.CacheSize, MinTTL: o.MinTTL, MaxTTL: o.MaxTTL, Now: o.Now})
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Resolver{
		id:      resolverIDs.Add(1),
		name:    o.Name,
		stats:   make([]serverCounters, len(servers)),
		cache:   cache,
		timeout: o.Timeout,
		log:     o.Logger,
		ctx:     ctx,
		cancel:  cancel,
		slots:   make(chan struct{}, maxFlights),
		flights: make(map[cacheKey]*flight),
	}
	for _, s := range servers {
		r.clients = append(r.clients, NewClient(s, o))
	}
	return r
}

// Name is the resolver's name.
func (r *Resolver) Name() string { return r.name }

// Close ends the exchanges in flight, waits for their goroutines and
// closes the servers' connections. Questions asked later fail with
// ErrClosed.
func (r *Resolver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	for _, c := range r.clients {
		c.Close()
	}
	return nil
}

// Stats reads the resolver's counters.
func (r *Resolver) Stats() Stats {
	s := Stats{
		Name:      r.name,
		Queries:   r.count.queries.Load(),
		CacheHits: r.count.hits.Load(),
		Failures:  r.count.failures.Load(),
		Servers:   make([]ServerStats, len(r.clients)),
	}
	for i, c := range r.clients {
		sc := &r.stats[i]
		ss := ServerStats{
			URL:        c.srv.URL,
			Exchanges:  sc.exchanges.Load(),
			Failures:   sc.failures.Load(),
			LatencySum: time.Duration(sc.latency.Load()),
		}
		s.Servers[i] = ss
		s.Exchanges += ss.Exchanges
		s.LatencySum += ss.LatencySum
		for b := range sc.buckets {
			s.Latency[b] += sc.buckets[b].Load()
		}
	}
	return s
}

// Flush empties the resolver's cache (shared: every resolver's entries).
func (r *Resolver) Flush() { r.cache.Flush() }

// canonical is name as the cache keys it: ASCII-lowercased, without the
// final dot. It allocates only when name has an upper-case letter.
func canonical(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

func questionKey(id uint32, m *mdns.Msg) cacheKey {
	q := m.Question[0]
	k := cacheKey{res: id, qtype: q.Qtype, qclass: q.Qclass, name: canonical(q.Name)}
	if opt := m.IsEdns0(); opt != nil && opt.Do() {
		k.flags |= keyDO
	}
	if m.CheckingDisabled {
		k.flags |= keyCD
	}
	return k
}

// Exchange answers the query m: from the cache, or from the first server
// with a usable answer (one that is not SERVFAIL, REFUSED or another
// error; NXDOMAIN is an answer). The upstream query is m's question alone
// with the resolver's own EDNS (the DO and CD bits kept), so identical
// questions share an exchange and an entry. The answer has m's ID and
// question, TTLs lowered by the time it spent in the cache, and an OPT
// record of the resolver's (the DO bit echoed) only when m has one. When
// every server answered with an error code, the last such answer is
// returned; when none answered, an error. A message of another opcode
// than QUERY gets NOTIMP.
func (r *Resolver) Exchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error) {
	if len(m.Question) != 1 {
		return nil, ErrBadQuery
	}
	if m.Opcode != mdns.OpcodeQuery {
		return notImplemented(m), nil
	}
	r.count.queries.Add(1)
	k := questionKey(r.id, m)
	e, f, err := r.begin(ctx, k)
	if err == nil && f != nil {
		e, err = r.wait(ctx, f)
	} else if err == nil {
		r.count.hits.Add(1)
	}
	if err != nil {
		r.count.failures.Add(1)
		return nil, err
	}
	if !usable(e.msg.Rcode) {
		r.count.failures.Add(1)
	}
	resp := e.served(r.cache.now())
	resp.Id = m.Id
	resp.Question = slices.Clone(m.Question)
	resp.RecursionDesired = m.RecursionDesired
	// The OPT record is hop by hop (RFC 6891 6.1.1): the server's goes,
	// and the resolver's own answers a query that has one.
	resp.Extra = slices.DeleteFunc(resp.Extra, func(rr mdns.RR) bool { return rr.Header().Rrtype == mdns.TypeOPT })
	if opt := m.IsEdns0(); opt != nil {
		resp.SetEdns0(ednsSize, opt.Do())
	}
	return resp, nil
}

// notImplemented is the answer to a message that is not a query (NOTIFY,
// UPDATE, ...): a resolver only asks.
func notImplemented(m *mdns.Msg) *mdns.Msg {
	resp := new(mdns.Msg)
	resp.SetRcode(m, mdns.RcodeNotImplemented)
	return resp
}

// usable reports whether an answer with rcode settles the question.
func usable(rcode int) bool {
	return rcode == mdns.RcodeSuccess || rcode == mdns.RcodeNameError
}

// begin returns the cached entry of k, or the flight that asks it (a
// flight in progress, or a new one).
func (r *Resolver) begin(ctx context.Context, k cacheKey) (*entry, *flight, error) {
	if e, _, ok := r.cache.get(k); ok {
		return e, nil, nil
	}
	r.mu.Lock()
	if f := r.flights[k]; f != nil {
		r.mu.Unlock()
		return nil, f, nil
	}
	r.mu.Unlock()
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		<-r.slots
		return nil, nil, ErrClosed
	}
	if f := r.flights[k]; f != nil {
		<-r.slots
		return nil, f, nil
	}
	// A flight may have stored the answer and ended since the first look.
	if e, _, ok := r.cache.get(k); ok {
		<-r.slots
		return e, nil, nil
	}
	f := &flight{done: make(chan struct{})}
	r.flights[k] = f
	r.wg.Add(1)
	go r.fly(f, k)
	return nil, f, nil
}

func (r *Resolver) wait(ctx context.Context, f *flight) (*entry, error) {
	select {
	case <-f.done:
		return f.e, f.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// fly asks k of the servers, caches the answer and ends the flight. It
// runs on its own goroutine, owned by the resolver, bounded by a timeout
// per server, so a caller that stops waiting does not stop the answer
// the others wait for.
func (r *Resolver) fly(f *flight, k cacheKey) {
	defer r.wg.Done()
	defer func() { <-r.slots }()
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout*time.Duration(max(len(r.clients), 1)))
	resp, err := r.upstream(ctx, k)
	cancel()
	if err == nil {
		f.e = r.cache.answerEntry(k, resp)
		if f.e.keep {
			r.cache.put(f.e)
		}
	} else {
		f.err = &nameError{name: k.name, what: mdns.Type(k.qtype).String(), err: err}
	}
	r.mu.Lock()
	delete(r.flights, k)
	r.mu.Unlock()
	close(f.done)
}

// query is the upstream query of k.
func query(k cacheKey) *mdns.Msg {
	m := new(mdns.Msg)
	m.RecursionDesired = true
	m.CheckingDisabled = k.flags&keyCD != 0
	m.Question = []mdns.Question{{Name: mdns.Fqdn(k.name), Qtype: k.qtype, Qclass: k.qclass}}
	m.SetEdns0(ednsSize, k.flags&keyDO != 0)
	return m
}

// upstream asks the servers in order, those that failed within
// failurePenalty last, each for at most the timeout, until one gives a
// usable answer.
func (r *Resolver) upstream(ctx context.Context, k cacheKey) (*mdns.Msg, error) {
	if len(r.clients) == 0 {
		return nil, errors.New("no servers")
	}
	m := query(k)
	var order, late [8]int
	idx, penalized := order[:0], late[:0]
	recent := time.Now().Add(-failurePenalty).UnixNano()
	for i, c := range r.clients {
		if c.lastFailure.Load() < recent {
			idx = append(idx, i)
		} else {
			penalized = append(penalized, i)
		}
	}
	idx = append(idx, penalized...)
	var fallback *mdns.Msg
	var errs []error
	for _, i := range idx {
		if ctx.Err() != nil {
			break
		}
		c := r.clients[i]
		sctx, cancel := context.WithTimeout(ctx, r.timeout)
		start := time.Now()
		resp, err := c.Exchange(sctx, m)
		cancel()
		r.stats[i].record(time.Since(start), err != nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if usable(resp.Rcode) {
			return resp, nil
		}
		fallback = resp
	}
	if fallback != nil {
		return fallback, nil
	}
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		if r.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	return nil, errors.Join(errs...)
}

// LookupIP returns the IPv4 and IPv6 addresses of host (A and AAAA asked
// at once), IPv4 first, unmapped. A name that does not exist is an error
// wrapping ErrNXDomain; a name without addresses (NODATA) is no addresses
// and no error. The slice is the caller's.
func (r *Resolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, _, err := r.lookup(ctx, nil, host)
	return ips, err
}

// LookupIPTTL is LookupIP with how long the answer stays valid: the
// smaller TTL of the two answers, as left in the cache (for NODATA, the
// negative TTL of the SOA).
func (r *Resolver) LookupIPTTL(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	return r.lookup(ctx, nil, host)
}

// AppendIP is LookupIPTTL appending the addresses to dst, so that a cached
// answer costs no allocation when dst has room.
func (r *Resolver) AppendIP(ctx context.Context, dst []netip.Addr, host string) ([]netip.Addr, time.Duration, error) {
	return r.lookup(ctx, dst, host)
}

// lookup appends the addresses of host to dst. The two families are two
// cache entries, the A and AAAA answers Exchange shares: a hit reads both
// and copies their addresses, allocating only when dst has no room.
func (r *Resolver) lookup(ctx context.Context, dst []netip.Addr, host string) ([]netip.Addr, time.Duration, error) {
	if ip, ok := literalIP(host); ok {
		return append(dst, ip), netx.DefaultTTL, nil
	}
	r.count.queries.Add(1)
	k4 := cacheKey{res: r.id, qtype: mdns.TypeA, qclass: mdns.ClassINET, name: canonical(host)}
	k6 := k4
	k6.qtype = mdns.TypeAAAA
	e4, e6, now := r.cache.getPair(k4, k6)
	ok4, ok6 := e4 != nil, e6 != nil
	if ok4 && ok6 {
		r.count.hits.Add(1)
		return cachedPair(dst, e4, e6, now)
	}
	if _, ok := mdns.IsDomainName(k4.name); !ok || k4.name == "" {
		r.count.failures.Add(1)
		return dst, 0, fmt.Errorf("dns: %q is not a domain name", host)
	}
	var f4, f6 *flight
	var err4, err6 error
	if !ok4 {
		e4, f4, err4 = r.begin(ctx, k4)
	}
	if !ok6 {
		e6, f6, err6 = r.begin(ctx, k6)
	}
	if f4 != nil {
		e4, err4 = r.wait(ctx, f4)
	}
	if f6 != nil {
		e6, err6 = r.wait(ctx, f6)
	}
	now = r.cache.now()
	ips, ttl, err := combine(dst, familyOf(e4, err4, k4, now), familyOf(e6, err6, k6, now))
	if err != nil && !errors.Is(err, ErrNXDomain) {
		r.count.failures.Add(1)
	}
	return ips, ttl, err
}

// cachedPair is combine for two cached entries, which are NOERROR or
// NXDOMAIN answers with a TTL (nothing else is cached), read without
// copying them.
func cachedPair(dst []netip.Addr, e4, e6 *entry, now time.Time) ([]netip.Addr, time.Duration, error) {
	exp := e4.expires
	if e6.expires.Before(exp) {
		exp = e6.expires
	}
	ttl := exp.Sub(now)
	if n := len(e4.addrs) + len(e6.addrs); n > 0 {
		if dst == nil {
			dst = make([]netip.Addr, 0, n)
		}
		return append(append(dst, e4.addrs...), e6.addrs...), ttl, nil
	}
	if e4.nx != nil {
		return dst, ttl, e4.nx
	}
	return dst, ttl, e6.nx
}

// literalIP parses host as an IP address, unmapped. It looks at host
// first so that a name costs no failed parse (whose error allocates).
func literalIP(host string) (netip.Addr, bool) {
	if host == "" {
		return netip.Addr{}, false
	}
	if c := host[len(host)-1]; !strings.Contains(host, ":") && (c < '0' || c > '9') {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err == nil
}

// familyAnswer is what one family's question gave.
type familyAnswer struct {
	addrs []netip.Addr
	ttl   time.Duration
	// bounded: ttl bounds the lookup's TTL. An empty answer that may not be
	// cached (NODATA without an SOA, as the system resolver gives for a
	// family a name lacks) bounds nothing: the other family's TTL stands.
	bounded bool
	nx      error // the answer is NXDOMAIN: its error
	err     error
}

// familyOf reads one family's entry (or the error of its question).
func familyOf(e *entry, err error, k cacheKey, now time.Time) familyAnswer {
	if err != nil {
		return familyAnswer{err: err}
	}
	a := familyAnswer{addrs: e.addrs, ttl: max(e.expires.Sub(now), 0), bounded: e.keep || len(e.addrs) > 0}
	switch e.msg.Rcode {
	case mdns.RcodeSuccess:
	case mdns.RcodeNameError:
		a.nx = e.nx
	default: // never cached: allocating here costs a hit nothing
		a.err = &nameError{name: k.name, what: mdns.Type(k.qtype).String(),
			err: fmt.Errorf("%w: %s", ErrServerFailure, mdns.RcodeToString[e.msg.Rcode])}
	}
	return a
}

// combine appends the two families' addresses to dst, IPv4 first: an
// answer when either family has addresses, else NXDOMAIN when either
// family says so, else NODATA when both answered, else the error.
func combine(dst []netip.Addr, a4, a6 familyAnswer) ([]netip.Addr, time.Duration, error) {
	n := len(a4.addrs) + len(a6.addrs)
	ttl := minTTL(a4, a6)
	switch {
	case n > 0:
		if dst == nil {
			dst = make([]netip.Addr, 0, n)
		}
		return append(append(dst, a4.addrs...), a6.addrs...), ttl, nil
	case a4.nx != nil:
		return dst, ttl, a4.nx
	case a6.nx != nil:
		return dst, ttl, a6.nx
	case a4.err != nil:
		return dst, 0, a4.err
	case a6.err != nil:
		return dst, 0, a6.err
	}
	return dst, ttl, nil
}

// minTTL is the smaller TTL of the families that answered with one.
func minTTL(a, b familyAnswer) time.Duration {
	aok, bok := a.err == nil && a.bounded, b.err == nil && b.bounded
	switch {
	case aok && bok:
		return min(a.ttl, b.ttl)
	case aok:
		return a.ttl
	case bok:
		return b.ttl
	}
	return 0
}
