package config

import (
	"slices"
	"time"

	"switchyard/spec"
)

// health lowers [health]. Its defaults are filled in whether or not a group
// uses them (without groups nothing is probed).
func (l *lowerer) health(f *fileHealth) spec.Health {
	h := spec.Health{
		TCPCheckURLs:   slices.Clone(defaultTCPCheckURLs),
		TCPCheckMethod: l.enum("health.tcp_check_method", f.TCPCheckMethod, defaultTCPCheckMethod, checkMethods),
		UDPCheckDNS:    slices.Clone(defaultUDPCheckDNS),
		CheckInterval:  defaultCheckInterval,
		CheckTimeout:   defaultCheckTimeout,
		IdleTimeout:    defaultIdleTimeout,
	}
	if f.TCPCheckURL != nil {
		h.TCPCheckURLs = nil // [] probes with a raw TCP connect
		eachString("health.tcp_check_url", *f.TCPCheckURL, func(ekey, u string) {
			if l.checkURL(ekey, u) {
				h.TCPCheckURLs = append(h.TCPCheckURLs, u)
			}
		})
	}
	if f.UDPCheckDNS != nil {
		h.UDPCheckDNS = nil // [] disables UDP probing
		eachString("health.udp_check_dns", *f.UDPCheckDNS, func(ekey, s string) {
			if a, ok := l.serverAddr(ekey, s); ok {
				h.UDPCheckDNS = append(h.UDPCheckDNS, a.String())
			}
		})
	}
	duration := func(key string, v *string, d *time.Duration) bool {
		if v == nil {
			return false
		}
		if got := l.positiveDuration(key, *v, ""); got > 0 {
			*d = got
			return true
		}
		return false
	}
	intervalOK := f.CheckInterval == nil || duration("health.check_interval", f.CheckInterval, &h.CheckInterval)
	timeoutOK := f.CheckTimeout == nil || duration("health.check_timeout", f.CheckTimeout, &h.CheckTimeout)
	duration("health.idle_timeout", f.IdleTimeout, &h.IdleTimeout)
	// One probe of a node ends before the next is due: a timeout longer
	// than the interval would have a node's probes overlap.
	switch {
	case !intervalOK || !timeoutOK || h.CheckTimeout <= h.CheckInterval:
	case f.CheckTimeout != nil:
		l.errorf("health.check_timeout", "%q is longer than check_interval (%s): a probe must end before the next one is due",
			*f.CheckTimeout, h.CheckInterval.String())
	default:
		l.errorf("health.check_interval", "%q is shorter than check_timeout (%s, the default): a probe must end before the next one is due",
			*f.CheckInterval, h.CheckTimeout.String())
	}
	return h
}

// state lowers [state]. A file that names no state file keeps its state in
// switchyard.db beside it; text from no file keeps it in memory only, and
// so does path = "".
func (l *lowerer) state(f *fileState) spec.State {
	switch {
	case f.Path == nil && l.dir == "":
		return spec.State{}
	case f.Path == nil:
		return spec.State{Path: l.absPath("state.path", defaultStateFile)}
	case *f.Path == "":
		return spec.State{}
	}
	return spec.State{Path: l.absPath("state.path", *f.Path)}
}
