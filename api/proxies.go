package api

import (
	"slices"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

// global is the GLOBAL selector over every group, balancer and outbound
// that Clash dashboards expect: the plane's (plane.Global), which global
// mode routes to.
const global = plane.GlobalTag

// historyMax is how many delay samples a proxy shows, as Clash keeps.
const historyMax = 10

type historyItem struct {
	Time  time.Time `json:"time"`
	Delay int64     `json:"delay"` // ms; 0 is a failed measurement
}

type urlHealth struct {
	Alive   bool          `json:"alive"`
	History []historyItem `json:"history"`
}

// proxy is one outbound, balancer or group as Clash lists it.
type proxy struct {
	Name        string               `json:"name"`
	Type        string               `json:"type"`
	UDP         bool                 `json:"udp"`
	XUDP        bool                 `json:"xudp"`
	TFO         bool                 `json:"tfo"`
	MPTCP       bool                 `json:"mptcp"`
	SMUX        bool                 `json:"smux"`
	Interface   string               `json:"interface"`
	DialerProxy string               `json:"dialer-proxy"`
	RoutingMark int                  `json:"routing-mark"`
	History     []historyItem        `json:"history"`
	Alive       bool                 `json:"alive"`
	Extra       map[string]urlHealth `json:"extra"`
	ID          string               `json:"id"`
	*groupFields
}

// groupFields are what a group (a balancer, GLOBAL) has beyond a proxy.
type groupFields struct {
	Now            string   `json:"now"`
	All            []string `json:"all"`
	TestURL        string   `json:"testUrl"`
	ExpectedStatus string   `json:"expectedStatus"`
	Fixed          string   `json:"fixed"`
	Hidden         bool     `json:"hidden"`
	Icon           string   `json:"icon"`
}

var outboundTypes = map[string]string{
	"direct": "Direct", "block": "Reject", "socks": "Socks5", "http": "Http",
	"shadowsocks": "Shadowsocks", "trojan": "Trojan", "vless": "Vless", "vmess": "Vmess",
	"hysteria2": "Hysteria2", "wireguard": "WireGuard", "dns": "Dns",
}

var policyTypes = map[string]string{
	"selector": "Selector", "urltest": "URLTest", "fallback": "Fallback", "loadbalance": "LoadBalance",
	// Score shows as URLTest, its now the scorer's aggregate TCP winner:
	// what a Clash dashboard knows of an automatic group.
	"score": "URLTest",
}

var strategyTypes = map[string]string{"failover": "Fallback", "round_robin": "LoadBalance"}

// view is one read of everything /proxies shows, made per request.
type view struct {
	s      *Server
	sp     *spec.Spec
	groups *group.Manager
	glob   *plane.Global // nil before the first plane
	eng    *health.Engine
	infos  map[string]group.Info
	order  []string // groups, balancers, outbounds: GLOBAL's members
}

func (s *Server) view() *view {
	v := &view{s: s, sp: s.spec.Load(), groups: s.b.Groups(), glob: s.b.Global(), eng: s.b.Health(), infos: map[string]group.Info{}}
	if v.groups != nil {
		for _, in := range v.groups.Groups() {
			v.infos[in.Tag] = in
			v.order = append(v.order, in.Tag)
		}
	}
	for _, b := range v.sp.Balancers {
		v.order = append(v.order, b.Tag)
	}
	for _, o := range v.sp.Outbounds {
		v.order = append(v.order, o.Tag)
	}
	return v
}

// all is every proxy by name, GLOBAL included.
func (v *view) all() map[string]proxy {
	out := make(map[string]proxy, len(v.order)+1)
	for _, name := range v.order {
		if p, ok := v.proxy(name); ok {
			out[name] = p
		}
	}
	out[global] = v.global()
	return out
}

// proxy describes the group, balancer or outbound called name.
func (v *view) proxy(name string) (proxy, bool) {
	if name == global {
		return v.global(), true
	}
	if in, ok := v.infos[name]; ok {
		return v.group(in), true
	}
	for _, b := range v.sp.Balancers {
		if b.Tag == name {
			p := proxy{Name: name, Type: strategyTypes[b.Strategy], UDP: true, Alive: true,
				History: []historyItem{}, Extra: map[string]urlHealth{}}
			p.groupFields = &groupFields{All: slices.Clone(b.Members)}
			// A failover balancer's now is its first healthy member; it is
			// alive while one member is.
			if st, ok := v.s.b.BalancerStatus(name); ok {
				p.Now = st.Now
				p.Alive = slices.Contains(st.Up, true)
			}
			return p, true
		}
	}
	if o, ok := v.outbound(name); ok {
		return v.leaf(o), true
	}
	return proxy{}, false
}

func (v *view) outbound(name string) (spec.Outbound, bool) {
	for _, o := range v.sp.Outbounds {
		if o.Tag == name {
			return o, true
		}
	}
	return spec.Outbound{}, false
}

func (v *view) leaf(o spec.Outbound) proxy {
	p := proxy{Name: o.Tag, Type: outboundTypes[o.Type], UDP: o.UDP, XUDP: o.PacketEncoding == "xudp",
		Interface: v.sp.Socket.Interface, RoutingMark: int(v.sp.Socket.Mark), Extra: map[string]urlHealth{}}
	if p.Type == "" {
		p.Type = o.Type
	}
	p.History, p.Alive, p.ID = v.health(o.Tag)
	return p
}

// health is the TCP delay history (both families, oldest first, at most
// historyMax), the liveness and the node id of the outbound tag. An
// outbound health does not watch reads alive with no history.
func (v *view) health(tag string) ([]historyItem, bool, string) {
	hist := []historyItem{}
	id, ok := v.s.b.NodeID(tag)
	if !ok {
		return hist, true, ""
	}
	if v.eng == nil {
		return hist, true, id.String()
	}
	st, ok := v.eng.State(id)
	if !ok {
		return hist, true, id.String()
	}
	var samples []health.Sample
	alive := false
	for _, f := range health.Families {
		ds := st.Of(health.TCP, f)
		alive = alive || ds.Alive || !ds.Observed
		samples = append(samples, ds.Display()...)
	}
	slices.SortStableFunc(samples, func(a, b health.Sample) int { return a.Time.Compare(b.Time) })
	if len(samples) > historyMax {
		samples = samples[len(samples)-historyMax:]
	}
	for _, x := range samples {
		hist = append(hist, historyItem{Time: x.Time, Delay: delayMS(x.Delay)})
	}
	return hist, alive, id.String()
}

// delayMS is a delay in Clash's milliseconds, where 0 is a failure: a
// measured delay under 1 ms shows as 1.
func delayMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

func (v *view) group(in group.Info) proxy {
	p := proxy{Name: in.Tag, Type: policyTypes[in.Policy], UDP: true, Alive: true, History: []historyItem{},
		Extra: map[string]urlHealth{}, ID: health.NodeID(in.Identity.ID).String()}
	if p.Type == "" {
		p.Type = in.Policy
	}
	// A group shows the health of the leaf it would pick now.
	if chain := v.groups.SelectionChain(in.Tag, netx.TCP); len(chain) > 0 {
		if o, ok := v.outbound(chain[len(chain)-1]); ok {
			l := v.leaf(o)
			p.History, p.Alive = l.History, l.Alive
		}
	} else {
		p.Alive = false
	}
	p.groupFields = &groupFields{Now: in.Now[netx.TCP], All: slices.Clone(in.Members), TestURL: v.testURL(in.Tag)}
	if p.All == nil {
		p.All = []string{}
	}
	return p
}

// testURL is the URL a group's delay test uses by default: its check_url,
// else the first of [health].tcp_check_url, else health's default.
func (v *view) testURL(tag string) string {
	for _, g := range v.sp.Groups {
		if g.Tag == tag && g.CheckURL != "" {
			return g.CheckURL
		}
	}
	if len(v.sp.Health.TCPCheckURLs) > 0 {
		return v.sp.Health.TCPCheckURLs[0]
	}
	return health.DefaultDelayURL
}

// global is the GLOBAL selector: its members and the member it goes to.
func (v *view) global() proxy {
	p := proxy{Name: global, Type: "Selector", UDP: true, Alive: true, History: []historyItem{}, Extra: map[string]urlHealth{}}
	p.groupFields = &groupFields{Now: v.globalNow(), All: slices.Clone(v.order), TestURL: v.testURL("")}
	if v.glob != nil {
		p.All = v.glob.Members()
	}
	if p.All == nil {
		p.All = []string{}
	}
	return p
}

// globalNow is the member GLOBAL goes to: its choice, else the final.
func (v *view) globalNow() string {
	if v.glob != nil {
		return v.glob.Now()
	}
	return v.sp.Route.Final
}

// leafOf is the outbound a delay test of name measures: an outbound
// itself, a group's current TCP leaf, GLOBAL's member's.
func (v *view) leafOf(name string) (string, bool) {
	if name == global {
		name = v.globalNow()
	}
	if _, ok := v.infos[name]; ok {
		chain := v.groups.SelectionChain(name, netx.TCP)
		if len(chain) == 0 {
			return "", false
		}
		name = chain[len(chain)-1]
	}
	_, ok := v.outbound(name)
	return name, ok
}

// groupList is every group (and balancer) as /group lists them, in
// configuration order.
func (v *view) groupList() []proxy {
	out := []proxy{}
	for _, name := range v.order {
		if p, ok := v.proxy(name); ok && p.groupFields != nil {
			out = append(out, p)
		}
	}
	return out
}
