package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"switchyard/ruleset"
	"switchyard/spec"
)

// fileRuleSet is one [[rule_sets]] table.
type fileRuleSet struct {
	Tag         *string `toml:"tag"`
	Path        *string `toml:"path"`
	Format      *string `toml:"format"`
	URL         *string `toml:"url"`
	Interval    *string `toml:"interval"`
	DownloadVia *string `toml:"download_via"`
}

// ruleSets lowers [[rule_sets]]: each file is read and compiled now, so
// that a broken one is a config error naming the file and its line; the
// compiled form is cached by content and reused when the route table is
// built from the spec.
func (l *lowerer) ruleSets(fs []fileRuleSet) []spec.RuleSet {
	if len(fs) == 0 {
		return nil
	}
	l.ruleSetTags = map[string]spec.RuleSet{}
	out := make([]spec.RuleSet, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		key := "rule_sets[" + strconv.Itoa(i) + "]"
		tag, ok := l.required(key+".tag", f.Tag)
		if ok {
			if _, dup := l.ruleSetTags[tag]; dup {
				l.errorf(key+".tag", "duplicate rule set tag %q", tag)
				ok = false
			}
		}
		format, okFormat := l.required(key+".format", f.Format)
		if okFormat && !l.oneOf(key+".format", format, ruleset.Formats) {
			okFormat = false
		}
		var rs spec.RuleSet
		if f.URL != nil {
			d, okURL := l.download(key, "rule_set", tag, f.URL, f.Interval, f.DownloadVia, f.Path, okFormat)
			if !okURL {
				continue
			}
			rs = spec.RuleSet{Tag: tag, Format: format, URL: d.url, Interval: d.interval, Via: d.via, CachePath: d.cache}
			l.cachedRuleSet(key, &rs)
		} else {
			for name, v := range map[string]*string{"interval": f.Interval, "download_via": f.DownloadVia} {
				if v != nil {
					l.errorf(key+"."+name, "%s applies to url: a rule set read from path is read at load and on reload", name)
					okFormat = false
				}
			}
			path, okPath := l.required(key+".path", f.Path)
			if !okPath || !okFormat {
				continue
			}
			rs = spec.RuleSet{Tag: tag, Path: l.absPath(key+".path", path), Format: format}
			if rs.Path == "" {
				continue
			}
			sum, _, err := loadRuleSet(rs.Path, rs.Format)
			if err != nil {
				l.errorf(key+".path", "rule set %q (%s) does not load: %s", tag, format, err)
				continue
			}
			rs.Sum = sum
		}
		if ok {
			l.ruleSetTags[tag] = rs
			out = append(out, rs)
		}
	}
	return out
}

// cachedRuleSet reads the cached copy of the url rule set rs: once it
// loads, it is the set's Path. With none, or one that does not load, the
// set matches nothing until its next download (a warning).
func (l *lowerer) cachedRuleSet(key string, rs *spec.RuleSet) {
	sum, missing, err := loadRuleSet(rs.CachePath, rs.Format)
	switch {
	case err == nil:
		rs.Path, rs.Sum = rs.CachePath, sum
	case missing:
		l.warnf(key+".url", "rule set %q matches nothing until its first download", rs.Tag)
	default:
		l.warnf(key+".url", "rule set %q: the cached copy does not load (%s): it matches nothing until its next download", rs.Tag, err)
	}
}

// loadRuleSet reads and compiles the rule set at path (the compiled form
// is kept for the route table) and returns its content's SHA-256, hex.
// missing: there is no file at path.
func loadRuleSet(path, format string) (sum string, missing bool, err error) {
	data, err := readBounded(path, ruleset.MaxFileSize)
	if err != nil {
		return "", errors.Is(err, fs.ErrNotExist), &ruleset.Error{Path: path, Offset: -1, Msg: err.Error()}
	}
	if _, err := ruleset.Parse(path, format, data); err != nil {
		return "", false, err
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), false, nil
}

// ruleSetRefs resolves rule_set tags to the rule sets they name.
func (l *lowerer) ruleSetRefs(key string, tags []string) []spec.RuleSet {
	var out []spec.RuleSet
	eachString(key, tags, func(ekey, v string) {
		rs, ok := l.ruleSetTags[v]
		if !ok {
			known := make([]string, 0, len(l.ruleSetTags))
			for t := range l.ruleSetTags {
				known = append(known, strconv.Quote(t))
			}
			hint := "no [[rule_sets]] is declared"
			if len(known) > 0 {
				hint = "declared: " + strings.Join(known, ", ")
			}
			l.errorf(ekey, "unknown rule set %q (%s)", v, hint)
			return
		}
		out = append(out, rs)
	})
	return out
}

// geoIP lowers [route].geoip_path: the database is read now, so that a
// file that is not one is a config error.
func (l *lowerer) geoIP(v *string) string {
	if v == nil {
		return ""
	}
	if *v == "" {
		l.errorf("route.geoip_path", "must not be empty")
		return ""
	}
	p := l.absPath("route.geoip_path", *v)
	if p == "" {
		return ""
	}
	if _, err := ruleset.LoadGeoIP(p); err != nil {
		l.errorf("route.geoip_path", "the GeoIP database does not load: %s", err)
		return ""
	}
	return p
}

// geoIPCodes lowers a rule's geoip list: two-letter country codes, given
// a database.
func (l *lowerer) geoIPCodes(key string, vs []string) []string {
	if l.geoIPPath == "" {
		l.errorf(key, "geoip needs a database: set [route].geoip_path to a MaxMind-format country database")
		return nil
	}
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if len(v) != 2 || !isLetters(v) {
			l.errorf(ekey, "%q is not a two-letter country code (such as \"cn\")", v)
			return
		}
		out = append(out, strings.ToUpper(v))
	})
	return out
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
