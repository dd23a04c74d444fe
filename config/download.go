package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// defaultDownloadInterval is how often a url provider or rule set is
// downloaded again when interval is left out.
const defaultDownloadInterval = 24 * time.Hour

// defaultDownloadVia is the outbound a download goes through when
// download_via is left out.
const defaultDownloadVia = "direct"

// download is the lowered download keys of a url provider or rule set.
type download struct {
	url      string
	interval time.Duration
	via      string
	cache    string // absolute
}

// viaRef is a download_via to check once every tag is recorded; provider
// is the tag of the provider it downloads ("" for a rule set).
type viaRef struct{ key, tag, provider string }

// download lowers url, interval, download_via and path (the cache file)
// of the [[providers]] or [[rule_sets]] table at key; kind is "provider"
// or "rule_set", and names the default cache file with tag and the URL.
// ok is false when a problem was recorded (or already was: in).
func (l *lowerer) download(key, kind, tag string, u, interval, via, path *string, in bool) (download, bool) {
	ok := in
	d := download{interval: defaultDownloadInterval, via: defaultDownloadVia}
	if *u == "" {
		l.errorf(key+".url", "must not be empty")
		ok = false
	} else if !l.checkDownloadURL(key+".url", *u) {
		ok = false
	}
	d.url = *u
	if interval != nil {
		if *interval == "0" {
			d.interval = 0
		} else if v := l.positiveDuration(key+".interval", *interval, `"0" to download only at start and on demand`); v > 0 {
			d.interval = v
		} else {
			ok = false
		}
	}
	if via != nil {
		if *via == "" {
			l.errorf(key+".download_via", "must not be empty (leave it out for direct)")
			ok = false
		} else {
			d.via = *via
			ref := viaRef{key: key + ".download_via", tag: *via}
			if kind == "provider" {
				ref.provider = tag
			}
			l.vias = append(l.vias, ref)
		}
	}
	switch {
	case path != nil && *path == "":
		l.errorf(key+".path", "must not be empty (leave it out to keep the download in the cache folder)")
		ok = false
	case path != nil:
		d.cache = l.absPath(key+".path", *path)
	case ok:
		d.cache = l.defaultCache(kind, tag, d.url)
	}
	if d.cache == "" {
		ok = false
	}
	return d, ok
}

// checkDownloadURL reports whether u is an http or https URL with a host.
func (l *lowerer) checkDownloadURL(key, u string) bool {
	if p, err := url.Parse(u); err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Hostname() != "" {
		return true
	}
	l.errorf(key, "%q is not an http or https URL (such as \"https://example.com/sub.yaml\")", u)
	return false
}

// defaultCache is where a download is kept when path is left out: the
// cache folder beside the state file, or, for a state kept in memory,
// under the user's cache folder. The file is named by kind, tag and the
// URL's hash, so that a changed URL does not read the old URL's copy.
func (l *lowerer) defaultCache(kind, tag, u string) string {
	sum := sha256.Sum256([]byte(u))
	name := kind + "-" + safeFileName(tag) + "-" + hex.EncodeToString(sum[:4])
	if l.cacheDir != "" {
		return filepath.Join(l.cacheDir, name)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "switchyard", "cache", name)
}

// safeFileName keeps letters, digits, '-', '_' and '.' of a tag; any other
// byte becomes '_' (the URL's hash keeps two such names apart).
func safeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// checkVias checks every download_via once outbounds, balancers and
// groups are recorded: it must name one of them. A provider with no nodes
// yet downloaded through a group whose only members are that provider's
// nodes can never be downloaded: a warning says so.
func (l *lowerer) checkVias(groups []fileGroup) {
	for _, v := range l.vias {
		_, kind := l.declared(v.tag)
		if kind == "" {
			l.errorf(v.key, "unknown outbound %q: download_via names an outbound, balancer or group", v.tag)
			continue
		}
		if kind != "group" || v.provider == "" || !l.providerPending[v.provider] {
			continue
		}
		for _, g := range groups {
			if g.Tag != nil && *g.Tag == v.tag && len(g.Members) == 0 && len(g.Use) == 1 && g.Use[0] == v.provider {
				l.warnf(v.key, "group %q has no member but the nodes of provider %q, which has none yet: it cannot download them; name a group or outbound with another way out", v.tag, v.provider)
			}
		}
	}
}
