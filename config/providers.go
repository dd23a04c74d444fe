package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"switchyard/provider"
	"switchyard/spec"
)

// maxProviderFile bounds the size of a provider file read at load.
const maxProviderFile = 32 << 20

// fileProvider is one [[providers]] table.
type fileProvider struct {
	Tag           *string `toml:"tag"`
	Path          *string `toml:"path"`
	URL           *string `toml:"url"`
	Interval      *string `toml:"interval"`
	Filter        *string `toml:"filter"`
	ExcludeFilter *string `toml:"exclude_filter"`
	DownloadVia   *string `toml:"download_via"`
}

// providers reads every [[providers]] file and lowers its nodes into
// outbounds, appended after the file's own. A node's tag is its name in
// the provider (made unique there with " 2", " 3"...); a node whose name is
// already the tag of a configured outbound, balancer or group, of a node
// of an earlier provider, or GLOBAL, gets the first free numbered suffix
// too.
// A node that cannot be converted, or that the loader refuses as it would
// refuse the same [[outbounds]] table, is skipped with a warning naming it
// and why. Outbound tags must already be recorded; group and balancer tags
// are checked afterwards against the node tags (declared).
func (l *lowerer) providers(fs []fileProvider, groups []fileGroup, balancers []fileBalancer) ([]spec.Outbound, []spec.Provider) {
	// Tags of groups and balancers are not recorded yet: a node must not
	// take one.
	reserved := map[string]bool{}
	for _, g := range groups {
		if g.Tag != nil {
			reserved[*g.Tag] = true
		}
	}
	for _, b := range balancers {
		if b.Tag != nil {
			reserved[*b.Tag] = true
		}
	}
	var outs []spec.Outbound
	var ps []spec.Provider
	for i := range fs {
		key := fmt.Sprintf("providers[%d]", i)
		o, p, ok := l.provider(key, &fs[i], reserved)
		if ok {
			outs = append(outs, o...)
			ps = append(ps, p)
		}
	}
	return outs, ps
}

func (l *lowerer) provider(key string, f *fileProvider, reserved map[string]bool) ([]spec.Outbound, spec.Provider, bool) {
	var p spec.Provider
	tag, ok := l.required(key+".tag", f.Tag)
	if ok {
		if first, dup := l.providerTags[tag]; dup {
			l.errorf(key+".tag", "duplicate provider tag %q (first declared on line %s)", tag, lineOf(first))
			ok = false
		} else {
			l.providerTags[tag] = key + ".tag"
		}
	}
	p.Tag = tag
	include := l.nameFilter(key+".filter", f.Filter)
	exclude := l.nameFilter(key+".exclude_filter", f.ExcludeFilter)
	var content []byte
	if f.URL != nil {
		var d download
		d, ok = l.download(key, "provider", tag, f.URL, f.Interval, f.DownloadVia, f.Path, ok)
		if !ok {
			return nil, p, false
		}
		p.URL, p.Interval, p.Via, p.CachePath = d.url, d.interval, d.via, d.cache
		b, err := readBounded(p.CachePath, maxProviderFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			l.warnf(key+".url", "provider %q has no nodes until its first download", tag)
			l.providerNodes[tag] = nil
			l.providerPending[tag] = true
			return nil, p, true
		case err != nil:
			l.warnf(key+".url", "provider %q: the cached copy %s is not read (%v): it has no nodes until its next download", tag, p.CachePath, err)
			l.providerNodes[tag] = nil
			l.providerPending[tag] = true
			return nil, p, true
		}
		content = b
	} else {
		for name, v := range map[string]*string{"interval": f.Interval, "download_via": f.DownloadVia} {
			if v != nil {
				l.errorf(key+"."+name, "%s applies to url: a provider read from path is read at load and on reload", name)
				ok = false
			}
		}
		if !ok {
			return nil, p, false
		}
		path, has := l.required(key+".path", f.Path)
		if !has {
			return nil, p, false
		}
		p.Path = l.absPath(key+".path", path)
		if p.Path == "" {
			return nil, p, false
		}
		b, err := readBounded(p.Path, maxProviderFile)
		if err != nil {
			l.errorf(key+".path", "provider file %s: %v", p.Path, err)
			return nil, p, false
		}
		content = b
	}
	if !ok {
		return nil, p, false
	}
	outs, ok := l.providerContent(key, tag, &p, content, include, exclude, reserved)
	return outs, p, ok
}

// providerContent lowers the nodes of a provider's content into p. The
// content of a file provider that does not parse is an error; a url
// provider's cached copy that does not (written by hand: a download that
// does not parse never replaces it) is a warning, and the provider has no
// nodes until its next download.
func (l *lowerer) providerContent(key, tag string, p *spec.Provider, content []byte, include, exclude *regexp.Regexp, reserved map[string]bool) ([]spec.Outbound, bool) {
	src, file := key+".path", p.Path
	if p.URL != "" {
		src, file = key+".url", p.CachePath
	}
	nodes, skipped, err := provider.Parse(content)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), "provider: ")
		if p.URL != "" {
			l.warnf(src, "provider %q: the cached copy %s does not parse (%s): it has no nodes until its next download", tag, file, why)
			l.providerNodes[tag] = nil
			l.providerPending[tag] = true
			return nil, true
		}
		l.errorf(src, "provider file %s: %s", file, why)
		return nil, false
	}
	for _, s := range skipped {
		l.warnf(src, "provider %q: node %q skipped: %s", tag, s.Name, s.Reason)
	}
	var outs []spec.Outbound
	for _, n := range nodes {
		if (include != nil && !include.MatchString(n.Name)) || (exclude != nil && exclude.MatchString(n.Name)) {
			continue
		}
		o, why := l.providerNode(src, n, reserved)
		if why != "" {
			l.warnf(src, "provider %q: node %q skipped: %s", tag, n.Name, why)
			continue
		}
		outs = append(outs, o)
		p.Nodes = append(p.Nodes, o.Tag)
	}
	l.providerNodes[tag] = p.Nodes
	if p.URL != "" && len(p.Nodes) == 0 {
		l.providerPending[tag] = true
	}
	return outs, true
}

// providerNode lowers one node as the [[outbounds]] table it stands for,
// with its own lowerer: its problems become the reason it is skipped.
func (l *lowerer) providerNode(key string, n provider.Node, reserved map[string]bool) (spec.Outbound, string) {
	taken := func(t string) bool {
		_, kind := l.declared(t)
		return kind != "" || reserved[t] || t == globalTag
	}
	name := n.Name
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("%s %d", n.Name, i)
	}
	table := map[string]any{"tag": name}
	for k, v := range n.Outbound {
		table[k] = v
	}
	data, err := toml.Marshal(map[string]any{"outbounds": []any{table}})
	if err != nil {
		return spec.Outbound{}, "cannot be written as an outbound: " + err.Error()
	}
	var fc fileConfig
	if err := toml.Unmarshal(data, &fc); err != nil || len(fc.Outbounds) != 1 {
		return spec.Outbound{}, fmt.Sprintf("cannot be read as an outbound: %v", err)
	}
	sub := newLowerer(l.dir)
	sub.dnsTable = l.dnsTable
	outs := sub.outbounds(fc.Outbounds)
	if len(sub.errs) > 0 {
		var why []string
		for _, e := range sub.errs {
			why = append(why, strings.TrimPrefix(e.Key, "outbounds[0].")+": "+e.Msg)
		}
		return spec.Outbound{}, strings.Join(why, "; ")
	}
	o := outs[0]
	l.outboundTags[o.Tag] = key
	l.declaredTypes[o.Tag] = o.Type
	return o, ""
}

// nameFilter compiles a regular expression on node names; nil when it is
// not written, is empty, or is refused.
func (l *lowerer) nameFilter(key string, v *string) *regexp.Regexp {
	if v == nil || *v == "" {
		return nil
	}
	re, err := regexp.Compile(*v)
	if err != nil {
		l.errorf(key, "bad regular expression: %v", err)
		return nil
	}
	return re
}

// readBounded reads the file at path, refusing one larger than limit.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d MiB", limit>>20)
	}
	return b, nil
}
