package ruleset

import (
	"bytes"
	"compress/zlib"
	"strings"
	"testing"
)

func srsSeed(body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("SRS\x02")
	w := zlib.NewWriter(&b)
	w.Write(body)
	w.Close()
	return b.Bytes()
}

// The parsers refuse bad input with an error: never a panic or a hang.
func FuzzSRS(f *testing.F) {
	f.Add([]byte("SRS\x01"))
	f.Add(srsSeed([]byte{1, 0, 3, 1, 1, 'x', 0xFF, 0}))
	f.Add(srsSeed([]byte{1, 0, 6, 1, 0, 0, 0, 0, 0, 0, 0, 1, 4, 10, 0, 0, 0, 4, 10, 255, 255, 255, 0xFF, 0}))
	f.Add(srsSeed([]byte{1, 0, 2, 0, 1, 0x02, 1, 0x1, 1, 'a', 0xFF, 0}))
	// a logical and of (network tcp) and an inverted (port 80); an
	// inverted or of an and of (port 80)
	f.Add(srsSeed([]byte{1, 1, 0, 2, 0, 1, 1, 3, 't', 'c', 'p', 0xFF, 0, 0, 9, 1, 0, 80, 0xFF, 1, 0}))
	f.Add(srsSeed([]byte{1, 1, 1, 1, 1, 0, 1, 0, 9, 1, 0, 80, 0xFF, 0, 0, 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c compiler
		if parseSRS(data, &c) == nil {
			c.finish()
		}
	})
}

func FuzzSource(f *testing.F) {
	f.Add([]byte(fixtures["source"]))
	f.Add([]byte(`{"version":3,"rules":[{"port_range":":80","network":"udp","invert":true}]}`))
	f.Add([]byte(strings.Replace(logicalSource, "%V", "3", 1)))
	f.Add([]byte(`{"version":1,"rules":[{"type":"logical","mode":"or","invert":true,"rules":[{"type":"logical","mode":"and","rules":[{"port":1}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c compiler
		if parseSource(data, &c) == nil {
			c.finish()
		}
	})
}

func FuzzClash(f *testing.F) {
	for _, s := range []map[string]string{fixtures, yamlFixtures} {
		for k, v := range s {
			if k != "source" {
				f.Add([]byte(v))
			}
		}
	}
	f.Add([]byte("*.a.*.com\n.x\nDST-PORT,1-2/3\n"))
	f.Add([]byte(logicalClassical))
	f.Add([]byte("NOT,((AND,((OR,((DOMAIN,a),(NETWORK,tcp))),(SRC-PORT,1-2)))),no-resolve\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []func([]byte, *compiler) error{parseClashDomain, parseClashIPCIDR, parseClashClassical} {
			var c compiler
			if p(data, &c) == nil {
				c.finish()
			}
		}
	})
}
