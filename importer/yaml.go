package importer

import (
	"bytes"
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseYAML reads a YAML document into its root mapping node.
func parseYAML(content []byte) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(content))
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("no YAML document")
	}
	root := deAlias(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("the YAML document is not a mapping")
	}
	return root, nil
}

// clashKeys are top-level keys of which one marks a Clash configuration.
var clashKeys = []string{"proxies", "proxy-groups", "proxy-providers", "rules", "rule-providers",
	"port", "socks-port", "mixed-port", "redir-port", "tproxy-port", "listeners", "dns", "tun"}

func isClash(root *yaml.Node) bool {
	for _, p := range pairs(root) {
		for _, k := range clashKeys {
			if p.key == k {
				return true
			}
		}
	}
	return false
}

func deAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 32; i++ {
		n = n.Alias
	}
	return n
}

// pair is one key of a mapping, with the line of the key.
type pair struct {
	key  string
	line int
	val  *yaml.Node
}

// pairs lists a mapping's keys in order, with YAML merge keys (<<)
// expanded: a merged key does not override one written in the mapping.
func pairs(n *yaml.Node) []pair {
	budget := maxMergedPairs
	return pairsDepth(n, 0, &budget)
}

// maxMergedPairs bounds the keys merge keys bring into one mapping: aliases
// of aliases would otherwise expand exponentially.
const maxMergedPairs = 4096

func pairsDepth(n *yaml.Node, depth int, budget *int) []pair {
	n = deAlias(n)
	if n == nil || n.Kind != yaml.MappingNode || depth > 8 || *budget <= 0 {
		return nil
	}
	*budget -= len(n.Content) / 2
	var own, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deAlias(n.Content[i+1])
		if k.Value == "<<" && k.Tag != "!!str" {
			srcs := []*yaml.Node{v}
			if v != nil && v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, s := range srcs {
				merged = append(merged, pairsDepth(s, depth+1, budget)...)
			}
			continue
		}
		own = append(own, pair{key: k.Value, line: k.Line, val: v})
	}
	for _, m := range merged {
		dup := false
		for _, o := range own {
			if o.key == m.key {
				dup = true
				break
			}
		}
		if !dup {
			own = append(own, m)
		}
	}
	return own
}

// get returns the value of key in mapping n (nil when absent).
func get(n *yaml.Node, key string) *yaml.Node {
	for _, p := range pairs(n) {
		if p.key == key {
			return p.val
		}
	}
	return nil
}

// scalar is the text of a scalar node ("" for anything else).
func scalar(n *yaml.Node) string {
	n = deAlias(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

func getStr(n *yaml.Node, key string) string { return scalar(get(n, key)) }

func getBool(n *yaml.Node, key string) bool {
	v := strings.ToLower(getStr(n, key))
	return v == "true" || v == "yes" || v == "on" || v == "1"
}

// items lists a sequence's elements; a scalar counts as a list of one.
func items(n *yaml.Node) []*yaml.Node {
	n = deAlias(n)
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(n.Content))
		for _, e := range n.Content {
			out = append(out, deAlias(e))
		}
		return out
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		return []*yaml.Node{n}
	}
	return nil
}

// strs lists the scalars of a sequence (or one scalar).
func strs(n *yaml.Node) []string {
	var out []string
	for _, e := range items(n) {
		if s := scalar(e); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}
