package importer

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"switchyard/config"
)

// dnsURL writes a Clash nameserver ("8.8.8.8", "tls://1.1.1.1",
// "https://dns.example/dns-query#PROXY", "system"...) as a switchyard DNS
// server URL; note says what was left out of it.
func dnsURL(s string) (url, note string, err error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '#'); i >= 0 {
		note = "its " + strconv.Quote(s[i:]) + " part (a proxy or options) is not converted"
		s = s[:i]
	}
	switch {
	case s == "system" || s == "dhcp://system":
		return "system", note, nil
	case strings.HasPrefix(s, "dhcp://"):
		return "system", "the DHCP server of an interface is asked as the system resolver", nil
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch scheme = strings.ToLower(scheme); scheme {
		case "udp", "tcp", "tls", "https":
			if scheme != "https" {
				rest = strings.TrimSuffix(rest, "/")
			}
			if i := strings.IndexByte(rest, '?'); i >= 0 {
				rest = rest[:i]
				note = "its query options are not converted"
			}
			s = scheme + "://" + rest
		default:
			return "", "", errors.New(scheme + ":// servers are not a DNS transport switchyard has (udp, tcp, tls, https)")
		}
	} else if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
		s = "udp://[" + s + "]"
	} else {
		s = "udp://" + s
	}
	if why := checkDNS(s); why != "" {
		return "", "", errors.New(why)
	}
	return s, note, nil
}

// checkDNS says why the loader refuses server URL s ("" when it takes it).
func checkDNS(s string) string {
	var b strings.Builder
	b.WriteString("[dns]\nservers = ")
	writeTo(&b, []string{s})
	_, _, err := config.Parse([]byte(b.String()), "import")
	if err == nil {
		return ""
	}
	var errs config.Errors
	if errors.As(err, &errs) && len(errs) > 0 {
		return errs[0].Msg
	}
	return err.Error()
}

// isIPServer says whether a DNS URL's host is an IP address.
func isIPServer(u string) bool {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return false
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	host := rest
	if strings.HasPrefix(rest, "[") {
		host = strings.Trim(rest[:strings.IndexByte(rest, ']')+1], "[]")
	} else if h, _, ok := strings.Cut(rest, ":"); ok {
		host = h
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// dnsRuleFromPattern sorts a domain pattern of Clash's forms ("+.x" x and
// the names under it, "*.x" one label under x, ".x" the names under x,
// anything else the name itself) into a DNS rule key and value.
func dnsRuleFromPattern(p string) (key, value string) {
	p = strings.ToLower(strings.TrimSpace(p))
	switch {
	case strings.HasPrefix(p, "+."):
		return "domain_suffix", p[2:]
	case strings.HasPrefix(p, "*."):
		return "domain_regex", `^[^.]+\.` + quoteDots(p[2:]) + `$`
	case strings.HasPrefix(p, "."):
		return "domain_regex", `.\.` + quoteDots(p[1:]) + `$`
	case strings.Contains(p, "*"):
		return "domain_regex", wildcardRegex(p)
	}
	return "domain", p
}

func quoteDots(s string) string { return regexp.QuoteMeta(s) }
