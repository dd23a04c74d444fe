package netlab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
)

// XrayRouting rewrites the config XrayServer writes into one for a server
// that works as a proxy yet fails some destinations behind it: a target
// path failure the client cannot see at setup. Every connection the
// server is asked to open to one of Blocked goes to a blackhole outbound
// (no response: the server ends the client's connection without a byte);
// everything else goes to freedom, as before.
type XrayRouting struct {
	// Ports moves inbounds off XrayServer's fixed ports, by protocol
	// ("vless", "trojan"); a protocol not named keeps its port. A port of
	// 0 removes that inbound.
	Ports map[string]int
	// Blocked are the destinations sent to the blackhole.
	Blocked []netip.AddrPort
	// SendThrough, when valid, is the source address of freedom's
	// connections (Xray's sendThrough), so the targets can tell this
	// server's connections from another's.
	SendThrough netip.Addr
	// AccessLog, when set, is the file Xray writes its access log to: one
	// line per accepted request with the outbound it went to.
	AccessLog string
}

// Apply returns config (an XrayServer config) with r's changes.
func (r XrayRouting) Apply(config string) (string, error) {
	var c map[string]any
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return "", fmt.Errorf("reading the Xray config: %w", err)
	}
	ins, _ := c["inbounds"].([]any)
	var kept []any
	for _, in := range ins {
		m, ok := in.(map[string]any)
		if !ok {
			return "", fmt.Errorf("an inbound of the Xray config is %T", in)
		}
		proto, _ := m["protocol"].(string)
		if port, ok := r.Ports[proto]; ok {
			if port == 0 {
				continue
			}
			m["port"] = port
		}
		kept = append(kept, m)
	}
	c["inbounds"] = kept
	freedom := map[string]any{"tag": "direct", "protocol": "freedom"}
	if r.SendThrough.IsValid() {
		freedom["sendThrough"] = r.SendThrough.String()
	}
	c["outbounds"] = []any{freedom, map[string]any{"tag": "blocked", "protocol": "blackhole"}}
	var rules []any
	for _, ap := range r.Blocked {
		rules = append(rules, map[string]any{
			"type":        "field",
			"ip":          []string{ap.Addr().String()},
			"port":        strconv.Itoa(int(ap.Port())),
			"network":     "tcp,udp",
			"outboundTag": "blocked",
		})
	}
	if len(rules) > 0 {
		c["routing"] = map[string]any{"domainStrategy": "AsIs", "rules": rules}
	}
	if r.AccessLog != "" {
		log, _ := c["log"].(map[string]any)
		if log == nil {
			log = map[string]any{}
		}
		log["access"] = r.AccessLog
		c["log"] = log
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
