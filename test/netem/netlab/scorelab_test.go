package netlab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The routing rewrite keeps XrayServer's VLESS inbound (on the port it is
// given), drops an inbound whose port is 0, and sends exactly the blocked
// destinations to the blackhole, the rest to freedom from sendThrough.
func TestXrayRoutingBlackholesTheBlocked(t *testing.T) {
	blocked := []netip.AddrPort{netip.MustParseAddrPort("10.213.0.1:4001"), netip.MustParseAddrPort("10.213.0.1:4002")}
	out, err := XrayRouting{
		Ports:       map[string]int{"vless": 2345, "trojan": 0},
		Blocked:     blocked,
		SendThrough: netip.MustParseAddr("127.0.0.1"),
		AccessLog:   "/tmp/access.log",
	}.Apply(XrayServer(netip.MustParseAddr("127.0.0.1"), "/c.pem", "/k.pem", 1))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Log      map[string]string `json:"log"`
		Inbounds []struct {
			Protocol string `json:"protocol"`
			Port     int    `json:"port"`
			Listen   string `json:"listen"`
		} `json:"inbounds"`
		Outbounds []struct {
			Tag, Protocol, SendThrough string
		} `json:"outbounds"`
		Routing struct {
			Rules []struct {
				IP          []string `json:"ip"`
				Port        string   `json:"port"`
				OutboundTag string   `json:"outboundTag"`
			} `json:"rules"`
		} `json:"routing"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Inbounds) != 1 || c.Inbounds[0].Protocol != "vless" || c.Inbounds[0].Port != 2345 || c.Inbounds[0].Listen != "127.0.0.1" {
		t.Fatalf("inbounds: %+v", c.Inbounds)
	}
	if len(c.Outbounds) != 2 || c.Outbounds[0].Protocol != "freedom" || c.Outbounds[0].SendThrough != "127.0.0.1" ||
		c.Outbounds[1].Protocol != "blackhole" || c.Outbounds[1].Tag != "blocked" {
		t.Fatalf("outbounds (freedom first: the default): %+v", c.Outbounds)
	}
	if len(c.Routing.Rules) != len(blocked) {
		t.Fatalf("rules: %+v", c.Routing.Rules)
	}
	for i, r := range c.Routing.Rules {
		if r.OutboundTag != "blocked" || len(r.IP) != 1 || r.IP[0] != blocked[i].Addr().String() || r.Port != fmt.Sprint(blocked[i].Port()) {
			t.Errorf("rule %d: %+v, want %v to the blackhole", i, r, blocked[i])
		}
	}
	if c.Log["access"] != "/tmp/access.log" || c.Log["loglevel"] != "warning" {
		t.Errorf("log: %+v", c.Log)
	}
	if _, err := (XrayRouting{}).Apply("{"); err == nil {
		t.Error("a config that is no JSON was rewritten")
	}
}

// A site records each request's source by path and answers it on a
// connection of its own; the probe path gets 204 on a connection that
// stays open for the probe's second request.
func TestSitesRecordSourcesAndServeProbes(t *testing.T) {
	s, err := StartSites(netip.MustParseAddr("127.0.0.1"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(site, path string) string {
		t.Helper()
		c, err := net.DialTimeout("tcp", site, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := get(s.Addrs[1], "/f/1"); got != siteOK {
		t.Fatalf("a GET got %q", got)
	}
	if src, ok := s.Source("/f/1"); !ok || src != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("source of /f/1: %v %v", src, ok)
	}
	if _, ok := s.Source("/f/2"); ok {
		t.Fatal("a source for a path never asked")
	}

	c, err := net.DialTimeout("tcp", s.Addrs[0], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	for i := range 2 {
		fmt.Fprintf(c, "HEAD %s HTTP/1.1\r\nHost: x\r\n\r\n", ProbePath)
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 204") {
			t.Fatalf("probe request %d: %q %v", i, line, err)
		}
		if blank, err := r.ReadString('\n'); err != nil || blank != "\r\n" {
			t.Fatalf("probe request %d: headers %q %v", i, blank, err)
		}
	}
}

// The summary counts a run's flows per site: successes by the node the
// site saw, failures by the node the flow table named, the median TTFB of
// the successes, and the flows in order.
func TestLabRunSummary(t *testing.T) {
	fail := errors.New("EOF")
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := &LabRun{Policy: "score", Flows: []LabFlow{
		{Site: "s1", Blocked: true, Err: fail, Chain: "A"},
		{Site: "s2", TTFB: ms(5), Carrier: "A"},
		{Site: "s1", Blocked: true, TTFB: ms(300), Carrier: "B"},
		{Site: "s2", TTFB: ms(7), Carrier: "A"},
		{Site: "s1", Blocked: true, TTFB: ms(200), Carrier: "B"},
		{Site: "s2", TTFB: ms(400), Carrier: "B"},
		{Site: "s1", Blocked: true, TTFB: ms(250), Carrier: "B"},
	}}
	sum := r.Summary([]string{"s1", "s2"})
	want := []SiteSummary{
		{Site: "s1", Blocked: true, Flows: 4, OK: 3, Median: ms(250), ViaB: 3, FailedA: 1, Sequence: "xBBB"},
		{Site: "s2", Flows: 3, OK: 3, Median: ms(7), ViaA: 2, ViaB: 1, Sequence: "AAB"},
	}
	for i := range want {
		if sum[i] != want[i] {
			t.Errorf("site %d: %+v, want %+v", i, sum[i], want[i])
		}
	}
	table := LabTable([]string{"s1", "s2"}, r)
	for _, s := range []string{"blocked", "75%", "250.0 ms", "xBBB", "100%", "7.0 ms", "AAB"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
}
