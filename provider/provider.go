// Package provider reads the nodes of a proxy provider (a subscription)
// from its content: a Clash YAML document with a proxies list, a list of
// share links, or base64 of such a list. A node is written as the keys of
// an [[outbounds]] table, so that the loader checks and lowers it exactly
// as it would one written in TOML. The package reads bytes only: it knows
// no files, sockets or outbounds.
package provider

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxNodes bounds the nodes read from one provider; the rest are skipped.
const MaxNodes = 10000

// Node is one converted node. Name is its name in the provider, made
// unique (see Parse); Outbound holds the keys of an [[outbounds]] table
// (type, server, transport...), without tag.
type Node struct {
	Name     string
	Outbound map[string]any
}

// Skipped is a node that could not be converted, and why.
type Skipped struct {
	Name   string
	Reason string
}

// Parse reads the nodes of content, detecting its format. A node that
// cannot be converted is skipped, never failing the whole; an error means
// the content as a whole is none of the formats. Names are made unique in
// order: the second node named "HK" becomes "HK 2", the third "HK 3"
// (skipping any suffixed name already taken). A node without a name is
// named after its server.
func Parse(content []byte) ([]Node, []Skipped, error) {
	var (
		nodes   []Node
		skipped []Skipped
		err     error
	)
	text := bytes.TrimSpace(bytes.TrimPrefix(content, []byte("\xef\xbb\xbf")))
	switch {
	case len(text) == 0:
		return nil, nil, errors.New("provider: the content is empty")
	case looksLikeLinks(text):
		nodes, skipped = parseLinks(text)
	case isClash(text):
		nodes, skipped, err = parseClash(text)
	default:
		decoded, ok := decodeBase64(text)
		if !ok || !looksLikeLinks(bytes.TrimSpace(decoded)) {
			return nil, nil, errors.New("provider: the content is neither a Clash YAML proxies list, share links, nor base64 of share links")
		}
		nodes, skipped = parseLinks(bytes.TrimSpace(decoded))
	}
	if err != nil {
		return nil, nil, err
	}
	if len(nodes) > MaxNodes {
		for _, n := range nodes[MaxNodes:] {
			skipped = append(skipped, Skipped{n.Name, fmt.Sprintf("the provider has more than %d nodes", MaxNodes)})
		}
		nodes = nodes[:MaxNodes]
	}
	taken := map[string]bool{}
	for i := range nodes {
		nodes[i].Name = Unique(nodes[i].Name, taken)
	}
	return nodes, skipped, nil
}

// Unique returns name, or name with the first free numbered suffix (" 2",
// " 3"...) when taken has it, and records the result in taken.
func Unique(name string, taken map[string]bool) string {
	out := name
	for n := 2; taken[out]; n++ {
		out = name + " " + strconv.Itoa(n)
	}
	taken[out] = true
	return out
}

// looksLikeLinks says whether the first line that is neither empty nor a
// # comment is a share link.
func looksLikeLinks(text []byte) bool {
	for _, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		scheme, _, ok := strings.Cut(string(line), "://")
		return ok && linkSchemes[strings.ToLower(scheme)]
	}
	return false
}

// decodeBase64 decodes std or URL base64, padded or not, ignoring line
// breaks and spaces.
func decodeBase64(text []byte) ([]byte, bool) {
	s := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, string(text))
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}
