package dns

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	mdns "github.com/miekg/dns"
)

// Action is what a rule does with the names it matches.
type Action uint8

const (
	// Forward asks the rule's resolver.
	Forward Action = iota
	// BlockNXDomain answers that the name does not exist.
	BlockNXDomain
	// BlockEmpty answers NOERROR with no records.
	BlockEmpty
)

func (a Action) String() string {
	switch a {
	case Forward:
		return "forward"
	case BlockNXDomain:
		return "block (nxdomain)"
	case BlockEmpty:
		return "block (empty)"
	}
	return "action(?)"
}

// ErrBlocked is wrapped by the LookupIP error of a name a block rule
// matches.
var ErrBlocked = errors.New("blocked by a DNS rule")

// NameMatcher matches a question's name: lowercase, without the final dot.
// route.Names is one.
type NameMatcher interface {
	MatchName(name string) bool
}

// Rule picks the answer for the names Names matches: Resolver's when the
// action is Forward, a block answer otherwise.
type Rule struct {
	Names    NameMatcher
	Action   Action
	Resolver *Resolver // Forward only
}

// Router picks the resolver of each question by its name: the first rule
// that matches, else the default. It answers like a Resolver; it owns none
// of the resolvers it is given.
type Router struct {
	def   *Resolver
	rules []Rule
}

// NewRouter returns a router over def and rules, tried in order. A Forward
// rule without a resolver uses def.
func NewRouter(def *Resolver, rules []Rule) *Router {
	rules = slices.Clone(rules)
	for i := range rules {
		if rules[i].Action == Forward && rules[i].Resolver == nil {
			rules[i].Resolver = def
		}
	}
	return &Router{def: def, rules: rules}
}

// Pick returns the resolver for name (nil when blocked) and the action.
func (r *Router) Pick(name string) (*Resolver, Action) {
	name = canonical(name)
	for i := range r.rules {
		if ru := &r.rules[i]; ru.Names.MatchName(name) {
			return ru.Resolver, ru.Action
		}
	}
	return r.def, Forward
}

// Exchange answers m with the resolver its name picks, or with the block
// answer of the rule: NXDOMAIN, or NOERROR with no records.
func (r *Router) Exchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error) {
	if len(m.Question) != 1 {
		return nil, ErrBadQuery
	}
	res, act := r.Pick(m.Question[0].Name)
	if act == Forward {
		return res.Exchange(ctx, m)
	}
	if m.Opcode != mdns.OpcodeQuery {
		return notImplemented(m), nil
	}
	resp := new(mdns.Msg)
	resp.SetReply(m)
	resp.RecursionAvailable = true
	if act == BlockNXDomain {
		resp.Rcode = mdns.RcodeNameError
	}
	if opt := m.IsEdns0(); opt != nil {
		resp.SetEdns0(ednsSize, opt.Do())
	}
	return resp, nil
}

// LookupIP resolves host with the resolver its name picks; a blocked name
// is an error wrapping ErrBlocked.
func (r *Router) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, _, err := r.LookupIPTTL(ctx, host)
	return ips, err
}

// LookupIPTTL is LookupIP with the answer's TTL.
func (r *Router) LookupIPTTL(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	res, err := r.forward(host)
	if err != nil {
		return nil, 0, err
	}
	return res.LookupIPTTL(ctx, host)
}

// AppendIP is LookupIPTTL appending to dst.
func (r *Router) AppendIP(ctx context.Context, dst []netip.Addr, host string) ([]netip.Addr, time.Duration, error) {
	res, err := r.forward(host)
	if err != nil {
		return dst, 0, err
	}
	return res.AppendIP(ctx, dst, host)
}

func (r *Router) forward(host string) (*Resolver, error) {
	if _, ok := literalIP(host); ok {
		return r.def, nil
	}
	res, act := r.Pick(host)
	if act != Forward {
		return nil, &nameError{name: canonical(host), err: ErrBlocked}
	}
	return res, nil
}
