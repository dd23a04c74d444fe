package dns

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
	"switchyard/route"
	"switchyard/spec"
)

// Exchanger answers DNS queries: what the DNS service asks.
type Exchanger interface {
	Exchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error)
}

// Env is what Build needs from its caller.
type Env struct {
	// Direct opens sockets straight out, under the socket policy: the
	// queries of pre_proxy, of servers, and of the bootstrap. nil:
	// PolicyDialer under an empty policy.
	Direct Dialer
	// Routed opens sockets as flows through the route table: the queries
	// of through_proxy and of the rules in split mode. nil: Direct.
	Routed Dialer
	// Bootstrap, when set, resolves the servers given by name instead of
	// the resolver spec.DNS.Bootstrap names.
	Bootstrap netx.Resolver
	Logger    *slog.Logger     // nil: discarded
	RootCAs   *x509.CertPool   // nil: the system roots
	Now       func() time.Time // the cache's clock; nil: time.Now
}

// Set is the resolvers of a DNS spec: one shared cache, the resolver of
// proxy servers, the router of destinations with the DNS rules, and what
// the DNS service asks. Close releases them all.
type Set struct {
	servers      *Resolver
	destinations *Router
	resolvers    []*Resolver // every resolver, the bootstrap's included, in build order
	cache        *Cache
}

// Servers resolves the proxy servers and endpoints the outbounds dial:
// pre_proxy asked directly, or servers. DNS rules do not apply to it (a
// proxy server's name is the configuration's, not traffic's).
func (s *Set) Servers() netx.Resolver { return s.servers }

// Destinations resolves the destinations this process connects to itself
// (direct, inside a WireGuard tunnel): through_proxy asked through the
// route table, or servers; the DNS rules pick per name.
func (s *Set) Destinations() netx.Resolver { return s.destinations }

// Exchanger is what the DNS service answers its clients with. The names
// local clients ask are destinations, so it is the destinations' router:
// through_proxy and the DNS rules.
func (s *Set) Exchanger() Exchanger { return s.destinations }

// Stats reads every resolver's counters, in build order: servers or
// pre_proxy, through_proxy, the rules', the bootstrap's.
func (s *Set) Stats() []Stats {
	out := make([]Stats, len(s.resolvers))
	for i, r := range s.resolvers {
		out[i] = r.Stats()
	}
	return out
}

// Flush empties the cache.
func (s *Set) Flush() { s.cache.Flush() }

// Close closes every resolver: their exchanges in flight end, their
// connections close.
func (s *Set) Close() error {
	for _, r := range s.resolvers {
		r.Close()
	}
	return nil
}

// Build makes the resolvers of s (nil: the system resolver for
// everything). It opens no socket. Errors name the key and the server URL.
func Build(s *spec.DNS, env Env) (*Set, error) {
	if s == nil {
		s = &spec.DNS{}
	}
	if len(s.Servers) > 0 && len(s.PreProxy)+len(s.ThroughProxy) > 0 {
		return nil, errors.New("dns: servers and pre_proxy/through_proxy are exclusive")
	}
	if env.Direct == nil {
		env.Direct = PolicyDialer(netx.NewDialer(netx.SocketPolicy{}, 0))
	}
	if env.Routed == nil {
		env.Routed = env.Direct
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	set := &Set{cache: NewCache(CacheOptions{Size: s.CacheSize, MinTTL: s.MinTTL, MaxTTL: s.MaxTTL, Now: env.Now})}
	base := Options{Timeout: s.Timeout, Cache: set.cache, RootCAs: env.RootCAs, Bootstrap: env.Bootstrap}
	var own *Resolver // the bootstrap resolver, when the set makes one
	if base.Bootstrap == nil {
		b, err := bootstrap(s, env, base)
		if err != nil {
			return nil, err
		}
		base.Bootstrap = b
		own, _ = b.(*Resolver)
	}
	newResolver := func(name, key string, urls []string, d Dialer) (*Resolver, error) {
		servers := make([]Server, 0, len(urls))
		for _, u := range urls {
			srv, err := ParseServer(u)
			if err != nil {
				return nil, fmt.Errorf("dns.%s: %w", key, err)
			}
			servers = append(servers, srv)
		}
		o := base
		o.Name, o.Dialer, o.Logger = name, d, env.Logger.With("resolver", name)
		r := New(servers, o)
		set.resolvers = append(set.resolvers, r)
		return r, nil
	}
	fail := func(err error) (*Set, error) {
		set.Close()
		if own != nil {
			own.Close()
		}
		return nil, err
	}
	system := []string{"system"}
	var dest *Resolver
	ruleDialer := env.Direct
	switch {
	case len(s.PreProxy)+len(s.ThroughProxy) == 0:
		urls := s.Servers
		if len(urls) == 0 {
			urls = system
		}
		r, err := newResolver("servers", "servers", urls, env.Direct)
		if err != nil {
			return fail(err)
		}
		set.servers, dest = r, r
	default:
		pre := s.PreProxy
		if len(pre) == 0 {
			pre = system
		}
		r, err := newResolver("pre_proxy", "pre_proxy", pre, env.Direct)
		if err != nil {
			return fail(err)
		}
		set.servers, dest = r, r
		if len(s.ThroughProxy) > 0 {
			if dest, err = newResolver("through_proxy", "through_proxy", s.ThroughProxy, env.Routed); err != nil {
				return fail(err)
			}
		}
		ruleDialer = env.Routed
	}
	rules := make([]Rule, 0, len(s.Rules))
	shared := map[string]*Resolver{} // rules listing the same servers share one resolver
	for i, sr := range s.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		names, err := route.CompileNames(spec.Rule{Domain: sr.Domain, DomainSuffix: sr.DomainSuffix, DomainKeyword: sr.DomainKeyword, DomainRegex: sr.DomainRegex, RuleSet: sr.RuleSet})
		if err != nil {
			return fail(fmt.Errorf("dns.%s: %w", key, err))
		}
		if names.Empty() {
			return fail(fmt.Errorf("dns.%s: a rule needs domain, domain_suffix, domain_keyword, domain_regex or rule_set", key))
		}
		ru := Rule{Names: names}
		switch sr.Action {
		case "":
			if len(sr.Servers) == 0 {
				return fail(fmt.Errorf("dns.%s: a rule needs servers or action = \"block\"", key))
			}
			id := strings.Join(sr.Servers, "\x00")
			if ru.Resolver = shared[id]; ru.Resolver == nil {
				if ru.Resolver, err = newResolver(fmt.Sprintf("rule %d", i+1), key+".servers", sr.Servers, ruleDialer); err != nil {
					return fail(err)
				}
				shared[id] = ru.Resolver
			}
		case "block":
			if len(sr.Servers) > 0 {
				return fail(fmt.Errorf("dns.%s: a block rule has no servers", key))
			}
			switch sr.BlockWith {
			case "", "nxdomain":
				ru.Action = BlockNXDomain
			case "empty":
				ru.Action = BlockEmpty
			default:
				return fail(fmt.Errorf("dns.%s: block_with %q (expected nxdomain or empty)", key, sr.BlockWith))
			}
		default:
			return fail(fmt.Errorf("dns.%s: unknown action %q (expected block)", key, sr.Action))
		}
		rules = append(rules, ru)
	}
	set.destinations = NewRouter(dest, rules)
	if own != nil {
		set.resolvers = append(set.resolvers, own) // closed and counted with the set
	}
	return set, nil
}

// bootstrap is the resolver s.Bootstrap names: the system's, or one
// udp:// or tcp:// server given by IP, asked directly.
func bootstrap(s *spec.DNS, env Env, base Options) (netx.Resolver, error) {
	if s.Bootstrap == "" || s.Bootstrap == "system" {
		return netx.SystemResolver{}, nil
	}
	srv, err := ParseServer(s.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("dns.bootstrap: %w", err)
	}
	if _, ok := srv.IP(); !ok || (srv.Kind != UDP && srv.Kind != TCP) {
		return nil, fmt.Errorf("dns.bootstrap: %q: expected \"system\" or a udp:// or tcp:// server given by IP", s.Bootstrap)
	}
	o := base
	o.Name, o.Dialer, o.Logger = "bootstrap", env.Direct, env.Logger.With("resolver", "bootstrap")
	return New([]Server{srv}, o), nil
}
