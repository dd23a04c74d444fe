package config

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/internal/clip"
	"switchyard/spec"
)

// lowerer checks the decoded file and lowers it into a spec. It collects
// every problem rather than stopping at the first; their lines are found
// afterwards, in one walk of the file (placeLines).
type lowerer struct {
	// dir is the folder of the file being lowered: relative paths are
	// relative to it. "" is text from no file (Parse): relative paths are
	// relative to the working directory, and the state is kept in memory
	// unless [state] names a file.
	dir  string
	errs []*Error
	// ruleSetTags maps a [[rule_sets]] tag to its lowered rule set.
	ruleSetTags map[string]spec.RuleSet
	// geoIPPath is [route].geoip_path, absolute; "" when not written.
	geoIPPath string
	warns     []*Error // problems that do not stop the load
	// later are problems whose text names the line of another key: they
	// are worded once lines are known.
	later []laterError

	// refused holds the keys of inbounds and outbounds whose type was
	// refused: unknown keys inside them are not worth reporting on top.
	refused []string
	// Tags declared in the file, with the key that declared each first.
	inboundTags  map[string]string
	outboundTags map[string]string
	balancerTags map[string]string
	groupTags    map[string]string
	// providerTags maps a provider tag to the key that declared it;
	// providerNodes a provider tag to its nodes' outbound tags, in order.
	providerTags  map[string]string
	providerNodes map[string][]string
	// providerPending holds the url providers with no nodes yet (not
	// downloaded, or their cached copy unreadable): a group may use them
	// and have no member until the download applies.
	providerPending map[string]bool
	// cacheDir is where downloads are kept by default: "cache" beside the
	// state file; "" when the state is kept in memory.
	cacheDir string
	// vias are the download_via references, checked once every tag is
	// recorded (download.go).
	vias []viaRef
	// declaredTypes maps a declared outbound tag to its canonical type, when
	// the type was accepted.
	declaredTypes map[string]string
	// noTCPProbe holds the outbounds of a probeable type whose server has
	// no TCP port to probe (XHTTP over HTTP/3).
	noTCPProbe map[string]bool
	// dnsTable is set when the file has a [dns] table, which a dns outbound
	// needs; dnsOutbound once a dns outbound is accepted.
	dnsTable, dnsOutbound bool
	tunHijack             bool // a tun inbound hijacks DNS: the DNS service is asked
	// rates maps a user name to the key of its first users entry and the
	// rates written there (users.go).
	rates map[string]userRate
}

func newLowerer(dir string) *lowerer {
	return &lowerer{
		dir:             dir,
		inboundTags:     map[string]string{},
		outboundTags:    map[string]string{},
		balancerTags:    map[string]string{},
		groupTags:       map[string]string{},
		providerTags:    map[string]string{},
		providerNodes:   map[string][]string{},
		providerPending: map[string]bool{},
		declaredTypes:   map[string]string{},
		noTCPProbe:      map[string]bool{},
	}
}

// errorf records a problem with key, on the line where key is written (or
// where its table is, for a missing key). A string argument is clipped
// (clip.Value), and so is the text of an error argument (which may quote
// the value): a problem never repeats a long value whole. A lineOf
// argument formats as the line of its key.
func (l *lowerer) errorf(key, format string, args ...any) {
	l.errs = append(l.errs, l.problem(key, format, args))
}

// warnf records a warning, worded and placed as errorf places a problem.
func (l *lowerer) warnf(key, format string, args ...any) {
	l.warns = append(l.warns, l.problem(key, format, args))
}

func (l *lowerer) problem(key, format string, args []any) *Error {
	e := &Error{Key: key}
	later := false
	for i, a := range args {
		switch a := a.(type) {
		case string:
			args[i] = clip.Value(a)
		case error:
			args[i] = clip.Value(a.Error())
		case lineOf:
			later = true
		}
	}
	if later {
		l.later = append(l.later, laterError{e, format, args})
		return e
	}
	e.Msg = fmt.Sprintf(format, args...)
	return e
}

// lineOf, as an argument of errorf for a %s, is the line where its key is
// written.
type lineOf string

type laterError struct {
	e      *Error
	format string
	args   []any
}

// placeLines finds, in one walk of data, the line of every problem that
// has none yet, and words the problems that name a line.
func (l *lowerer) placeLines(data []byte, errs []*Error) {
	var want []string
	for _, e := range errs {
		if e.Line == 0 && e.Key != "" {
			want = append(want, e.Key)
		}
	}
	for _, le := range l.later {
		for _, a := range le.args {
			if k, ok := a.(lineOf); ok {
				want = append(want, string(k))
			}
		}
	}
	ix := indexKeys(data, want)
	for _, e := range errs {
		if e.Line == 0 {
			e.Line = ix.line(e.Key)
		}
	}
	for _, le := range l.later {
		for i, a := range le.args {
			if k, ok := a.(lineOf); ok {
				le.args[i] = strconv.Itoa(ix.line(string(k)))
			}
		}
		le.e.Msg = fmt.Sprintf(le.format, le.args...)
	}
	l.later = nil
}

func (l *lowerer) lower(f *fileConfig) *spec.Spec {
	l.dnsTable = f.DNS != nil
	state := l.state(&f.State)
	if st := state; st.Path != "" {
		l.cacheDir = filepath.Join(filepath.Dir(st.Path), "cache")
	}
	ruleSets := l.ruleSets(f.RuleSets) // before the DNS rules and the rules that name them
	s := &spec.Spec{
		Log: spec.Log{
			Level:  l.enum("log.level", f.Log.Level, defaultLogLevel, logLevels),
			Format: l.enum("log.format", f.Log.Format, defaultLogFormat, logFormats),
		},
		Socket: l.socket(&f.Socket),
		Dial:   l.dial(&f.Dial),
		Reload: spec.Reload{
			Drain: spec.Drain(l.enum("reload.drain", f.Reload.Drain, string(defaultReloadDrain), drains)),
		},
		Inbounds:  l.inbounds(f.Inbounds),
		Outbounds: l.outbounds(f.Outbounds),
	}
	// Provider nodes are outbounds too, recorded before balancers and
	// groups name them.
	nodes, providers := l.providers(f.Providers, f.Groups, f.Balancers)
	s.Outbounds = append(s.Outbounds, nodes...)
	s.Providers = providers
	s.Balancers = l.balancers(f.Balancers)
	s.Groups = l.groups(f.Groups)
	l.checkVias(f.Groups)
	s.DNS = l.dns(f.DNS) // after the outbounds
	s.Health = l.health(&f.Health)
	s.Warmup = l.warmup(&f.Warmup)
	s.State = state
	s.API = l.api(f.API)
	final := defaultFinal
	if f.Route.Final != nil {
		final = *f.Route.Final
		l.outboundRef("route.final", final)
	}
	s.Route = spec.Route{Final: final, Mode: l.enum("route.mode", f.Route.Mode, defaultRouteMode, routeModes)}
	l.geoIPPath = l.geoIP(f.Route.GeoIPPath)
	s.Route.GeoIPPath = l.geoIPPath
	s.Rules = l.rules(f.Rules)
	s.RuleSets = ruleSets
	tunSocket(s)
	l.tunDNSLoop(s)
	return s
}

func (l *lowerer) socket(f *fileSocket) spec.Socket {
	var s spec.Socket
	if f.Mark < 0 || f.Mark > math.MaxUint32 {
		l.errorf("socket.mark", "%d is out of range 0..%d", f.Mark, uint32(math.MaxUint32))
	} else {
		s.Mark = uint32(f.Mark)
	}
	s.Interface = f.Interface
	var v4, v6 string
	for i, text := range f.BindAddress {
		key := fmt.Sprintf("socket.bind_address[%d]", i)
		ip, err := netip.ParseAddr(text)
		if err != nil || ip.Zone() != "" {
			l.errorf(key, "%q is not an IP address", text)
			continue
		}
		ip = ip.Unmap()
		first, family := &v6, "IPv6"
		if ip.Is4() {
			first, family = &v4, "IPv4"
		}
		if *first != "" {
			l.errorf(key, "a second %s address (%s has one); give at most one per family", family, *first)
			continue
		}
		*first = key
		s.BindAddresses = append(s.BindAddresses, ip)
	}
	if f.TCPKeepAliveIdle != "" {
		s.TCPKeepAliveIdle = l.positiveDuration("socket.tcp_keepalive_idle", f.TCPKeepAliveIdle, `"" for the OS default`)
	}
	return s
}

func (l *lowerer) dial(f *fileDial) spec.Dial {
	d := spec.Dial{ConnectTimeout: defaultConnectTimeout, MaxConcurrentDials: defaultMaxConcurrentDials}
	if f.ConnectTimeout != nil {
		if v := l.positiveDuration("dial.connect_timeout", *f.ConnectTimeout, ""); v > 0 {
			d.ConnectTimeout = v
		}
	}
	if n := f.MaxConcurrentDials; n != nil {
		if *n < 1 || *n > math.MaxInt32 {
			l.errorf("dial.max_concurrent_dials", "%d is out of range 1..%d", *n, math.MaxInt32)
		} else {
			d.MaxConcurrentDials = int(*n)
		}
	}
	return d
}

// positiveDuration parses a Go duration that must be above zero; it returns
// 0 after recording a problem.
func (l *lowerer) positiveDuration(key, text, hint string) time.Duration {
	if hint != "" {
		hint = "; use " + hint
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		l.errorf(key, "%q is not a duration (such as \"30s\" or \"1m30s\")%s", text, hint)
		return 0
	}
	if d <= 0 {
		l.errorf(key, "%q must be above zero%s", text, hint)
		return 0
	}
	return d
}

// checkURL reports whether u is an http or https URL with a host, recording
// a problem when not.
func (l *lowerer) checkURL(key, u string) bool {
	p, err := url.Parse(u)
	if err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && p.Hostname() != "" {
		return true
	}
	l.errorf(key, "%q is not an http or https URL (such as \"https://www.gstatic.com/generate_204\")", u)
	return false
}

// nonNegativeDuration parses a Go duration that may be zero; it returns 0
// after recording a problem.
func (l *lowerer) nonNegativeDuration(key, text string) time.Duration {
	d, err := time.ParseDuration(text)
	if err != nil {
		l.errorf(key, "%q is not a duration (such as \"50ms\" or \"1s\")", text)
		return 0
	}
	if d < 0 {
		l.errorf(key, "%q must not be negative", text)
		return 0
	}
	return d
}

// enum returns the value written at key, or def when it is not written. A
// value outside allowed is a problem (and def is returned).
func (l *lowerer) enum(key string, v *string, def string, allowed []string) string {
	if v == nil {
		return def
	}
	if !l.oneOf(key, *v, allowed) {
		return def
	}
	return *v
}

// oneOf reports whether v is in allowed, recording a problem when not.
func (l *lowerer) oneOf(key, v string, allowed []string) bool {
	if slices.Contains(allowed, v) {
		return true
	}
	l.errorf(key, "%q is not one of %s", v, strings.Join(allowed, " | "))
	return false
}

// required returns the non-empty string written at key.
func (l *lowerer) required(key string, v *string) (string, bool) {
	switch {
	case v == nil:
		l.errorf(key, "required key is missing")
		return "", false
	case *v == "":
		l.errorf(key, "must not be empty")
		return "", false
	}
	return *v, true
}

// absPath makes a path written in the file absolute: a relative path is
// relative to the file's folder. The file at the path is not read here.
func (l *lowerer) absPath(key, path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	abs, err := filepath.Abs(filepath.Join(l.dir, path))
	if err != nil {
		l.errorf(key, "cannot make %q absolute: %v", path, err)
		return ""
	}
	return abs
}

// outboundRef checks that tag names a route target: an outbound, declared or
// implicit, a balancer or a group.
func (l *lowerer) outboundRef(key, tag string) {
	if _, kind := l.declared(tag); kind == "" {
		l.errorf(key, "unknown outbound %q", tag)
	}
}

// outboundType returns the canonical type of the outbound tagged tag,
// declared or implicit. known is false when no outbound has the tag; typ is
// "" when the declared outbound's type was missing or refused.
func (l *lowerer) outboundType(tag string) (typ string, known bool) {
	if _, ok := l.outboundTags[tag]; ok {
		return l.declaredTypes[tag], true
	}
	for _, o := range implicitOutbounds {
		if o.Tag == tag {
			return o.Type, true
		}
	}
	return "", false
}

// isRefused reports whether key lies inside an inbound or outbound whose
// type was refused.
func (l *lowerer) isRefused(key string) bool {
	for _, r := range l.refused {
		if key == r || strings.HasPrefix(key, r+".") {
			return true
		}
	}
	return false
}
