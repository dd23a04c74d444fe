package dns

import (
	"math"
	"net/netip"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// DefaultCacheSize and DefaultMaxTTL are the cache bounds when none are
// given: the entry count every LRU of this project has, and a day, beyond
// which RFC 2308 found long TTLs problematic. DefaultMinTTL, 0, keeps the
// TTLs the servers give.
const (
	DefaultCacheSize = 4096
	DefaultMinTTL    = 0
	DefaultMaxTTL    = 24 * time.Hour
)

// CacheOptions are the bounds of a cache.
type CacheOptions struct {
	Size   int           // entries; <= 0: DefaultCacheSize
	MinTTL time.Duration // every TTL is raised to at least this
	MaxTTL time.Duration // and lowered to at most this; 0: DefaultMaxTTL
	// Now is the clock (tests give a fake one); nil: time.Now.
	Now func() time.Time
}

// Cache keeps answers for as long as their TTL says, clamped to
// [MinTTL, MaxTTL], at most Size of them: when full, the least recently
// used entry goes. Negative answers (NXDOMAIN, and NODATA: no record of
// the type) are kept for the negative TTL of RFC 2308 — the smaller of the
// SOA record's TTL and its minimum field, clamped likewise; one without an
// SOA is not kept. Truncated answers and server failures are not kept.
// Entries are keyed by the question and by the resolver that answered,
// so one cache can serve several resolvers. Safe for concurrent use.
type Cache struct {
	minTTL, maxTTL time.Duration
	size           int
	now            func() time.Time

	mu  sync.Mutex
	m   map[cacheKey]*entry
	lru entry // sentinel of the recency list: lru.next is the most recent
}

// cacheKey is a question as a resolver asked it. name is lowercase,
// without the final dot.
type cacheKey struct {
	res    uint32 // the resolver
	flags  uint8
	qtype  uint16
	qclass uint16
	name   string
}

const (
	keyDO = 1 << iota // the question asked for DNSSEC records
	keyCD             // checking disabled
)

// entry is one cached answer. Its fields other than the links are set
// before it is published and never change, so a reader may use them
// after the lock is released.
type entry struct {
	key        cacheKey
	prev, next *entry

	stored  time.Time
	expires time.Time
	msg     *mdns.Msg    // the answer, read-only
	addrs   []netip.Addr // its A or AAAA records, read-only
	nx      error        // NXDOMAIN: the error LookupIP returns, made once
	keep    bool         // the answer may be cached
}

// NewCache returns an empty cache.
func NewCache(o CacheOptions) *Cache {
	if o.Size <= 0 {
		o.Size = DefaultCacheSize
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	o.MinTTL = min(max(o.MinTTL, 0), o.MaxTTL)
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{minTTL: o.MinTTL, maxTTL: o.MaxTTL, size: o.Size, now: o.Now}
	c.reset()
	return c
}

func (c *Cache) reset() {
	c.m = make(map[cacheKey]*entry)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

// Len is the number of entries, expired ones not yet dropped included.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Flush drops every entry.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
}

// get returns the live entry of k, now the most recent, and the time it
// was read at.
func (c *Cache) get(k cacheKey) (*entry, time.Time, bool) {
	now := c.now()
	e, ok := c.getAt(k, now)
	return e, now, ok
}

// getPair is get of two keys at once (a name's A and AAAA).
func (c *Cache) getPair(k1, k2 cacheKey) (e1, e2 *entry, now time.Time) {
	now = c.now()
	c.mu.Lock()
	e1 = c.live(k1, now)
	e2 = c.live(k2, now)
	c.mu.Unlock()
	return e1, e2, now
}

// getAt is get at the time now.
func (c *Cache) getAt(k cacheKey, now time.Time) (*entry, bool) {
	c.mu.Lock()
	e := c.live(k, now)
	c.mu.Unlock()
	return e, e != nil
}

// live returns the entry of k unless it expired (then it is dropped), and
// makes it the most recent. c.mu is held.
func (c *Cache) live(k cacheKey, now time.Time) *entry {
	e := c.m[k]
	if e == nil {
		return nil
	}
	if !now.Before(e.expires) {
		c.remove(e)
		return nil
	}
	if c.lru.next != e {
		c.unlink(e)
		c.pushFront(e)
	}
	return e
}

// put stores e, replacing the entry of its key, and drops the least
// recently used entries over the bound.
func (c *Cache) put(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[e.key]; old != nil {
		c.remove(old)
	}
	c.m[e.key] = e
	c.pushFront(e)
	for len(c.m) > c.size {
		c.remove(c.lru.prev)
	}
}

func (c *Cache) remove(e *entry) {
	c.unlink(e)
	delete(c.m, e.key)
}

func (c *Cache) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) clamp(ttl time.Duration) time.Duration {
	return min(max(ttl, c.minTTL), c.maxTTL)
}

// answerEntry makes the entry of the answer resp to the question k: its
// TTL, its addresses, and whether it may be cached. The TTLs in resp are
// rewritten to the clamped ones (and an SOA's to the negative TTL), so
// that what is served from the entry is what it is kept for; resp is the
// entry's from then on.
func (c *Cache) answerEntry(k cacheKey, resp *mdns.Msg) *entry {
	now := c.now()
	e := &entry{key: k, msg: resp, stored: now}
	if k.qtype == mdns.TypeA || k.qtype == mdns.TypeAAAA {
		e.addrs = addrsOf(resp, k.qtype)
	}
	if resp.Rcode == mdns.RcodeNameError {
		e.nx = &nameError{name: k.name, err: ErrNXDomain}
	}
	ttl, negative, ok := answerTTL(resp, k.qtype)
	if !ok {
		e.expires = now
		return e
	}
	ttl = c.clamp(ttl)
	secs := ttlSeconds(ttl)
	for _, sec := range [...][]mdns.RR{resp.Answer, resp.Ns, resp.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			switch {
			case h.Rrtype == mdns.TypeOPT:
			case negative && h.Rrtype == mdns.TypeSOA:
				h.Ttl = secs
			default:
				h.Ttl = ttlSeconds(c.clamp(time.Duration(h.Ttl) * time.Second))
			}
		}
	}
	e.expires = now.Add(ttl)
	e.keep = ttl > 0
	return e
}

func ttlSeconds(d time.Duration) uint32 {
	return uint32(min(d/time.Second, math.MaxUint32))
}

// answerTTL is how long resp stays valid, before clamping: the smallest
// TTL of its answer records, or for a negative answer the smaller of the
// SOA's TTL and minimum (RFC 2308 5). ok is false for what is not cached.
func answerTTL(resp *mdns.Msg, qtype uint16) (ttl time.Duration, negative, ok bool) {
	if resp.Truncated {
		return 0, false, false
	}
	minAnswer := uint32(math.MaxUint32)
	hasType := false
	for _, rr := range resp.Answer {
		h := rr.Header()
		minAnswer = min(minAnswer, h.Ttl)
		if h.Rrtype == qtype || qtype == mdns.TypeANY {
			hasType = true
		}
	}
	switch resp.Rcode {
	case mdns.RcodeSuccess:
		if hasType {
			return seconds(minAnswer), false, true
		}
		if soa := soaOf(resp); soa != nil {
			return seconds(min(soa.Hdr.Ttl, soa.Minttl, minAnswer)), true, true
		}
		if len(resp.Answer) > 0 { // a CNAME chain whose end has no record of the type
			return seconds(minAnswer), false, true
		}
	case mdns.RcodeNameError:
		if soa := soaOf(resp); soa != nil {
			return seconds(min(soa.Hdr.Ttl, soa.Minttl)), true, true
		}
	}
	return 0, false, false
}

func seconds(s uint32) time.Duration { return time.Duration(s) * time.Second }

func soaOf(resp *mdns.Msg) *mdns.SOA {
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*mdns.SOA); ok {
			return soa
		}
	}
	return nil
}

// addrsOf returns the addresses of the records of qtype (A or AAAA) in the
// answer section, unmapped, in their order.
func addrsOf(resp *mdns.Msg, qtype uint16) []netip.Addr {
	var out []netip.Addr
	for _, rr := range resp.Answer {
		var ip netip.Addr
		var ok bool
		switch r := rr.(type) {
		case *mdns.A:
			if qtype == mdns.TypeA {
				ip, ok = netip.AddrFromSlice(r.A.To4())
			}
		case *mdns.AAAA:
			if qtype == mdns.TypeAAAA {
				ip, ok = netip.AddrFromSlice(r.AAAA.To16())
			}
		}
		if ok {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// served returns a copy of the entry's answer for the query q: its ID and
// question, and every TTL lowered by the entry's age in whole seconds.
func (e *entry) served(now time.Time) *mdns.Msg {
	m := e.msg.Copy()
	age := uint32(min(now.Sub(e.stored)/time.Second, math.MaxUint32))
	if age == 0 {
		return m
	}
	for _, sec := range [...][]mdns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == mdns.TypeOPT {
				continue
			}
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m
}
