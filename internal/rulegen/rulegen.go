// Package rulegen writes large rule sets for benchmarks: the same n rules as
// a switchyard TOML file and as a sing-box JSON config, so that both loaders
// are measured on equivalent input.
package rulegen

import (
	"bufio"
	"io"
	"strconv"
)

// The rules cycle through these shapes, one matcher each except the port
// shape (network and port), sending to two outbounds in turn.
const shapes = 6

// outbound is the tag rule i sends to: "direct", or "alt", a second direct
// outbound, so that rules do not all share one target.
func outbound(i int) string {
	if i%2 == 0 {
		return "direct"
	}
	return "alt"
}

// matcher writes the matcher of rule i as TOML or JSON: key and value.
func matcher(w *bufio.Writer, i int, json bool) {
	kv := func(key, val string) {
		if json {
			w.WriteString(`"` + key + `": ` + val)
		} else {
			w.WriteString(key + " = " + val)
		}
	}
	sep := "\n"
	if json {
		sep = ", "
	}
	n := strconv.Itoa(i)
	switch i % shapes {
	case 0:
		kv("domain_suffix", `["s`+n+`.example.com"]`)
	case 1:
		kv("domain", `["d`+n+`.example.net"]`)
	case 2:
		ip := strconv.Itoa(10+i>>16&63) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
		kv("ip_cidr", `["`+ip+`.0/24"]`)
	case 3:
		kv("domain_keyword", `["kw`+n+`"]`)
	case 4:
		kv("network", `"tcp"`)
		w.WriteString(sep)
		kv("port", "["+strconv.Itoa(1+i%65535)+"]")
	case 5:
		lo := 1 + i%60000
		kv("port_range", `["`+strconv.Itoa(lo)+":"+strconv.Itoa(lo+100)+`"]`)
	}
}

// TOML writes a switchyard configuration of n [[rules]] and the outbound
// they name.
func TOML(out io.Writer, n int) error {
	w := bufio.NewWriterSize(out, 64<<10)
	w.WriteString("[[outbounds]]\ntag = \"alt\"\ntype = \"direct\"\n\n")
	for i := range n {
		w.WriteString("[[rules]]\n")
		matcher(w, i, false)
		w.WriteString("\noutbound = \"" + outbound(i) + "\"\n")
	}
	return w.Flush()
}

// SingBox writes a sing-box configuration whose route.rules are the n rules
// TOML writes, over the same two direct outbounds.
func SingBox(out io.Writer, n int) error {
	w := bufio.NewWriterSize(out, 64<<10)
	w.WriteString(`{"log": {"level": "warn"}, "outbounds": [{"type": "direct", "tag": "direct"}, {"type": "direct", "tag": "alt"}], "route": {"final": "direct", "rules": [` + "\n")
	for i := range n {
		if i > 0 {
			w.WriteString(",\n")
		}
		w.WriteString("{")
		matcher(w, i, true)
		w.WriteString(`, "outbound": "` + outbound(i) + `"}`)
	}
	w.WriteString("\n]}}\n")
	return w.Flush()
}
