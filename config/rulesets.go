package config

import (
	"strconv"
	"strings"

	"switchyard/ruleset"
	"switchyard/spec"
)

// fileRuleSet is one [[rule_sets]] table.
type fileRuleSet struct {
	Tag      *string `toml:"tag"`
	Path     *string `toml:"path"`
	Format   *string `toml:"format"`
	URL      *string `toml:"url"`
	Interval *string `toml:"interval"`
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
		if f.URL != nil || f.Interval != nil {
			k := key + ".url"
			if f.URL == nil {
				k = key + ".interval"
			}
			l.errorf(k, "rule sets are read from a local file in this version: download the list and give its path "+
				"(path = \"...\"); url and interval are not read")
			continue
		}
		path, okPath := l.required(key+".path", f.Path)
		format, okFormat := l.required(key+".format", f.Format)
		if okFormat && !l.oneOf(key+".format", format, ruleset.Formats) {
			okFormat = false
		}
		if !okPath || !okFormat {
			continue
		}
		rs := spec.RuleSet{Tag: tag, Path: l.absPath(key+".path", path), Format: format}
		if rs.Path == "" {
			continue
		}
		if _, err := ruleset.Load(rs.Path, rs.Format); err != nil {
			l.errorf(key+".path", "rule set %q (%s) does not load: %s", tag, format, err)
			continue
		}
		if ok {
			l.ruleSetTags[tag] = rs
			out = append(out, rs)
		}
	}
	return out
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
