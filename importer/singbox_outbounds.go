package importer

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// sbIgnored are outbound keys that change nothing switchyard does.
var sbIgnored = map[string]bool{"tag": true, "type": true, "connect_timeout": true, "tcp_fast_open": true,
	"tcp_multi_path": true, "udp_fragment": true, "authenticated_length": true, "gso": true, "workers": true,
	"system": true, "name": true, "listen_port": true, "system_interface": true, "interface_name": true}

// sbOut is one sing-box outbound being converted: the keys read, the
// output keys.
type sbOut struct {
	n    *jnode
	used map[string]bool
	o    map[string]any
}

func (s *sbOut) str(k string) string  { s.used[k] = true; return s.n.s(k) }
func (s *sbOut) node(k string) *jnode { s.used[k] = true; return s.n.get(k) }

// sbOutbound converts one outbound or endpoint.
func (c *conv) sbOutbound(n *jnode, kind string) {
	tag, typ := n.s("tag"), n.s("type")
	item := kind + " " + strconv.Quote(tag)
	if tag == "" {
		c.report(n.line, kind+"s", "an %s without a tag: not converted", kind)
		return
	}
	if typ == "dns" {
		// The DNS service answers the flows a rule hijacks (port-53 flows
		// first of all): no outbound stands for it.
		c.dnsTags[tag] = true
		return
	}
	s := &sbOut{n: n, used: map[string]bool{}, o: map[string]any{}}
	if err := c.sbFill(s, typ, kind); err != nil {
		c.drop(n.line, item, tag, "not converted: "+err.Error())
		return
	}
	var ignored []string
	n.each(func(k string, _ *jnode) {
		if !s.used[k] && !sbIgnored[k] {
			ignored = append(ignored, k)
		}
	})
	// A direct or block outbound keeps its tag; direct and block are
	// reserved only as implicit outbounds.
	if (typ == "direct" || typ == "block") && (tag == "direct" || tag == "block") && tag == typ && !c.declared[tag] {
		c.declared[tag] = true
		t := &table{header: "outbounds", array: true}
		t.set("tag", tag)
		t.set("type", typ)
		for _, k := range sortedKeys(s.o) {
			if k != "type" {
				t.set(k, s.o[k])
			}
		}
		c.targets[tag] = tag
		c.outbounds = append(c.outbounds, t)
	} else if _, ok := c.addOutbound(n.line, kind, tag, s.o); !ok {
		return
	}
	for _, k := range ignored {
		c.report(n.lineOf(k), item, "%s is not converted", k)
	}
	if typ == "direct" {
		c.directTags[tag] = true
	}
}

// sbFill writes the switchyard keys of one outbound.
func (c *conv) sbFill(s *sbOut, typ, kind string) error {
	o := s.o
	if d := s.str("detour"); d != "" {
		return fmt.Errorf("detour %q chains it through another outbound, and switchyard has no proxy chains", d)
	}
	if st := s.str("domain_strategy"); st != "" {
		if af, ok := sbStrategies[st]; ok {
			o["address_family"] = af
		}
	}
	if r := s.node("domain_resolver"); r != nil && r.kind == 'o' {
		if af, ok := sbStrategies[r.s("strategy")]; ok {
			o["address_family"] = af
		}
	}
	server := func() error {
		srv, ok := sbServer(s.n)
		s.used["server"], s.used["server_port"] = true, true
		if !ok {
			return errors.New("no server and server_port")
		}
		o["server"] = srv
		return nil
	}
	noUDP := func() {
		if nw := s.str("network"); nw == "tcp" {
			o["udp"] = false
		}
	}
	refuse := func(k, why string) error {
		// A flag, or an object that is on only with "enabled": true.
		if v := s.node(k); v != nil && ((v.kind == 'b' && v.b) || (v.kind == 'o' && v.boolean("enabled"))) {
			return errors.New(why)
		}
		return nil
	}
	switch typ {
	case "direct", "block", "dns":
		o["type"] = typ
		if typ == "direct" {
			delete(o, "udp")
		} else {
			delete(o, "address_family")
		}
		return nil
	case "socks":
		o["type"] = "socks"
		if v := s.str("version"); v != "" && v != "5" {
			return fmt.Errorf("SOCKS version %s: switchyard's client speaks SOCKS5", v)
		}
		if err := refuse("udp_over_tcp", "udp_over_tcp is not supported"); err != nil {
			return err
		}
		c.sbAccount(s)
		noUDP()
		return server()
	case "http":
		o["type"] = "http"
		c.sbAccount(s)
		if p := s.str("path"); p != "" {
			return errors.New("an HTTP proxy path is not supported")
		}
		if err := refuse("headers", "extra HTTP proxy headers are not supported"); err != nil {
			return err
		}
		if err := c.sbTLS(s); err != nil {
			return err
		}
		return server()
	case "shadowsocks":
		o["type"] = "shadowsocks"
		o["method"] = s.str("method")
		o["password"] = s.str("password")
		if p := s.str("plugin"); p != "" {
			return fmt.Errorf("plugin %q is not supported", p)
		}
		if err := refuse("udp_over_tcp", "udp_over_tcp is not supported"); err != nil {
			return err
		}
		if err := refuse("multiplex", "multiplex is not supported"); err != nil {
			return err
		}
		noUDP()
		return server()
	case "vmess", "vless", "trojan":
		o["type"] = typ
		switch typ {
		case "trojan":
			o["password"] = s.str("password")
		case "vmess":
			o["uuid"] = s.str("uuid")
			if sec := s.str("security"); sec != "" {
				o["security"] = sec
			}
			if aid, _ := s.n.int("alter_id"); aid > 0 {
				return fmt.Errorf("alter_id %d (legacy MD5 authentication) is not supported: only 0", aid)
			}
			s.used["alter_id"] = true
			if s.n.boolean("global_padding") {
				o["global_padding"] = true
			}
			s.used["global_padding"] = true
		case "vless":
			o["uuid"] = s.str("uuid")
			if f := s.str("flow"); f != "" {
				o["flow"] = f
			}
		}
		pe := s.str("packet_encoding")
		if typ == "vless" && !s.n.has("packet_encoding") {
			pe = "xudp" // sing-box's VLESS default
		}
		switch pe {
		case "", "xudp":
			if pe != "" && typ != "trojan" {
				o["packet_encoding"] = pe
			}
		default:
			return fmt.Errorf("packet_encoding %q is not supported (xudp is)", pe)
		}
		if err := refuse("multiplex", "multiplex is not supported"); err != nil {
			return err
		}
		noUDP()
		if err := c.sbTLS(s); err != nil {
			return err
		}
		if err := c.sbTransport(s); err != nil {
			return err
		}
		return server()
	case "hysteria2":
		o["type"] = "hysteria2"
		o["password"] = s.str("password")
		if v := s.node("server_ports"); v != nil && len(s.n.list("server_ports")) > 0 {
			return errors.New("port hopping (server_ports) is not supported")
		}
		s.used["hop_interval"] = true
		for _, k := range []string{"up_mbps", "down_mbps"} {
			if v, ok := s.n.int(k); ok && v > 0 {
				o[k] = v
			}
			s.used[k] = true
		}
		if ob := s.node("obfs"); ob != nil {
			switch t := ob.s("type"); t {
			case "":
			case "salamander":
				o["obfs"] = map[string]any{"type": "salamander", "password": ob.s("password")}
			default:
				return fmt.Errorf("obfs %q is not supported", t)
			}
		}
		noUDP()
		if err := c.sbTLS(s); err != nil {
			return err
		}
		if t, ok := o["tls"].(map[string]any); ok {
			delete(t, "fingerprint")
			if a, ok := t["alpn"].([]string); ok && len(a) == 1 && a[0] == "h3" {
				delete(t, "alpn")
			}
			if len(t) == 0 {
				delete(o, "tls")
			}
		}
		return server()
	case "wireguard":
		return c.sbWireGuard(s, kind)
	}
	return fmt.Errorf("type %q is not a protocol switchyard has a client for", typ)
}

func (c *conv) sbAccount(s *sbOut) {
	if u, p := s.str("username"), s.str("password"); u != "" || p != "" {
		s.o["username"], s.o["password"] = u, p
	}
}

// sbTLS converts the tls object.
func (c *conv) sbTLS(s *sbOut) error {
	n := s.node("tls")
	if n == nil || !n.boolean("enabled") {
		return nil
	}
	t := map[string]any{}
	if sn := n.s("server_name"); sn != "" {
		t["server_name"] = sn
	}
	if n.boolean("insecure") {
		t["verify"] = "insecure"
	}
	if a := n.strs("alpn"); len(a) > 0 {
		t["alpn"] = a
	}
	if p := n.s("certificate_path"); p != "" {
		t["ca_file"] = p
		c.report(n.lineOf("certificate_path"), "outbound "+strconv.Quote(s.n.s("tag")), "tls.ca_file %q: the file must exist beside the output for it to load", p)
	}
	if len(n.strs("certificate")) > 0 {
		return errors.New("tls.certificate (an inline PEM) is not supported: save it to a file and give certificate_path")
	}
	if u := n.get("utls"); u != nil && u.boolean("enabled") {
		fp := u.s("fingerprint")
		if fp == "" {
			fp = "chrome"
		}
		t["fingerprint"] = fp
	}
	if r := n.get("reality"); r != nil && r.boolean("enabled") {
		// REALITY takes the server name and fingerprint into its own
		// table (the loader refuses them beside it).
		re := map[string]any{"public_key": r.s("public_key")}
		if sid := r.s("short_id"); sid != "" {
			re["short_id"] = sid
		}
		for _, k := range []string{"server_name", "fingerprint"} {
			if v, ok := t[k]; ok {
				re[k] = v
			}
		}
		if _, ok := t["verify"]; ok {
			c.report(n.lineOf("insecure"), "outbound "+strconv.Quote(s.n.s("tag")), "tls.insecure is not converted: REALITY checks the server by its key")
		}
		t = map[string]any{"reality": re}
	}
	if e := n.get("ech"); e != nil && e.boolean("enabled") {
		return errors.New("ECH is not supported")
	}
	if n.boolean("disable_sni") {
		return errors.New("tls.disable_sni is not supported")
	}
	s.o["tls"] = t
	return nil
}

// sbTransport converts the transport object.
func (c *conv) sbTransport(s *sbOut) error {
	n := s.node("transport")
	if n == nil {
		return nil
	}
	tr := map[string]any{}
	typ := n.s("type")
	switch typ {
	case "ws", "httpupgrade":
		tr["type"] = typ
		if p := n.s("path"); p != "" {
			tr["path"] = p
		}
		if h := n.s("host"); h != "" {
			tr["host"] = h
		}
		headers := map[string]string{}
		n.get("headers").each(func(k string, v *jnode) {
			val := v.str
			if v.kind == 'a' && len(v.vals) > 0 {
				val = v.vals[0].str
			}
			if strings.EqualFold(k, "host") {
				tr["host"] = val
				return
			}
			headers[k] = val
		})
		if len(headers) > 0 {
			if typ != "ws" {
				return errors.New("httpupgrade headers other than Host are not supported")
			}
			tr["headers"] = headers
		}
		if ed, ok := n.int("max_early_data"); ok && ed > 0 {
			if typ != "ws" {
				return errors.New("early data on httpupgrade is not supported")
			}
			tr["max_early_data"] = ed
			if h := n.s("early_data_header_name"); h != "" {
				tr["early_data_header"] = h
			}
		}
	case "grpc":
		tr["type"] = "grpc"
		if sn := n.s("service_name"); sn != "" {
			tr["service_name"] = sn
		}
	default:
		return fmt.Errorf("transport %q is not supported (switchyard has ws, grpc and httpupgrade)", typ)
	}
	s.o["transport"] = tr
	if t, ok := s.o["tls"].(map[string]any); ok && typ != "grpc" {
		if a, ok := t["alpn"].([]string); ok {
			keep := []string{}
			for _, p := range a {
				if p == "http/1.1" {
					keep = append(keep, p)
				}
			}
			if len(keep) == 0 {
				delete(t, "alpn")
			} else {
				t["alpn"] = keep
			}
		}
	}
	return nil
}

// sbWireGuard converts the legacy wireguard outbound and the wireguard
// endpoint (one peer).
func (c *conv) sbWireGuard(s *sbOut, kind string) error {
	o := s.o
	o["type"] = "wireguard"
	o["private_key"] = s.str("private_key")
	if mtu, ok := s.n.int("mtu"); ok && mtu > 0 {
		o["mtu"] = mtu
	}
	s.used["mtu"] = true
	addrKey := "local_address"
	if kind == "endpoint" {
		addrKey = "address"
	}
	addrs := s.n.strs(addrKey)
	s.used[addrKey] = true
	if len(addrs) == 0 {
		return fmt.Errorf("no %s", addrKey)
	}
	o["addresses"] = addrs
	peer := s.n
	peers := s.n.list("peers")
	s.used["peers"] = true
	switch {
	case len(peers) > 1:
		return errors.New("more than one peer is not supported: one peer per node")
	case len(peers) == 1:
		peer = peers[0]
	case kind == "endpoint":
		return errors.New("no peer")
	}
	host, portKey := peer.s("server"), "server_port"
	if kind == "endpoint" || len(peers) == 1 {
		host, portKey = peer.s("address"), "port"
		if host == "" {
			host, portKey = peer.s("server"), "server_port"
		}
	}
	port, ok := peer.int(portKey)
	if host == "" || !ok || port <= 0 || port > 65535 {
		return errors.New("no peer address and port")
	}
	s.used["server"], s.used["server_port"] = true, true
	o["endpoint"] = net.JoinHostPort(strings.Trim(host, "[]"), strconv.FormatInt(port, 10))
	pub := peer.s("public_key")
	if pub == "" {
		pub = peer.s("peer_public_key")
	}
	s.used["peer_public_key"] = true
	o["peer_public_key"] = pub
	psk := peer.s("pre_shared_key")
	s.used["pre_shared_key"] = true
	if psk != "" {
		o["preshared_key"] = psk
	}
	if ips := peer.strs("allowed_ips"); len(ips) > 0 {
		o["allowed_ips"] = ips
	}
	if ka, ok := peer.int("persistent_keepalive_interval"); ok && ka > 0 {
		o["keepalive"] = duration(ka, "s")
	}
	var reserved []int64
	for _, r := range peer.list("reserved") {
		v, err := strconv.ParseInt(r.str, 10, 64)
		if err != nil {
			return errors.New("reserved as a base64 string is not supported; write three numbers")
		}
		reserved = append(reserved, v)
	}
	s.used["reserved"] = true
	if len(reserved) > 0 {
		o["reserved"] = reserved
	}
	return nil
}
