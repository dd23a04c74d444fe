package api

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	mdns "github.com/miekg/dns"

	"switchyard/config"
	"switchyard/supervisor"
)

// dnsStub answers every A question with 192.0.2.7 and counts them.
func dnsStub(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int32)
	srv := &mdns.Server{PacketConn: pc, Handler: mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		n.Add(1)
		r := new(mdns.Msg)
		r.SetReply(q)
		r.Answer = append(r.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)})
		w.WriteMsg(r)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String(), n
}

// GET /dns/query asks through the DNS rules and the cache and answers in
// the DoH JSON form; POST /cache/dns/flush empties the cache, so the next
// question goes upstream again.
func TestDNSQueryAndFlush(t *testing.T) {
	stub, asked := dnsStub(t)
	s, _, err := config.Parse([]byte(`
[dns]
servers = ["udp://`+stub+`"]
serve = true

[dns.fakeip]
ipv4 = "198.18.0.0/15"
`), "dns.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := supervisor.New(s, supervisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	srv := New(sv, Options{Spec: s})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := &rig{sv: sv, srv: srv, spec: s, base: "http://" + srv.Addr().String()}
	var ans struct {
		Status   int
		Question []struct {
			Name  string
			Qtype uint16
		}
		Answer []struct {
			Name string `json:"name"`
			Type uint16 `json:"type"`
			TTL  uint32 `json:"TTL"`
			Data string `json:"data"`
		}
	}
	r.get(t, "/dns/query?name=example.test&type=A", 200, &ans)
	if ans.Status != 0 || len(ans.Question) != 1 || ans.Question[0].Name != "example.test." ||
		len(ans.Answer) != 1 || ans.Answer[0].Data != "192.0.2.7" || ans.Answer[0].Type != 1 {
		t.Fatalf("answer %+v", ans)
	}
	r.get(t, "/dns/query?name=example.test", 200, &ans)
	if asked.Load() != 1 {
		t.Fatalf("a cached name asked upstream %d times", asked.Load())
	}
	if code, _ := r.do(t, http.MethodPost, "/cache/dns/flush", "", ""); code != http.StatusNoContent {
		t.Fatalf("flush: %d", code)
	}
	r.get(t, "/dns/query?name=example.test", 200, &ans)
	if asked.Load() != 2 {
		t.Fatalf("after a flush the name was asked upstream %d times in all", asked.Load())
	}
	if code, body := r.do(t, http.MethodGet, "/dns/query?name=x&type=BOGUS", "", ""); code != 400 || !strings.Contains(string(body), "invalid query type") {
		t.Fatalf("a bad type: %d %s", code, body)
	}
	if code, _ := r.do(t, http.MethodPost, "/cache/fakeip/flush", "", ""); code != http.StatusNoContent {
		t.Fatalf("fake IP flush: %d", code)
	}
}

// Without [dns] the endpoints say the section is disabled.
func TestDNSEndpointsWithoutDNS(t *testing.T) {
	r := newRig(t, Options{})
	if code, body := r.do(t, http.MethodGet, "/dns/query?name=example.test", "", ""); code != 404 {
		t.Fatalf("query without [dns]: %d %s", code, body)
	}
	if code, _ := r.do(t, http.MethodPost, "/cache/fakeip/flush", "", ""); code != 404 {
		t.Fatalf("fake IP flush without fake IPs: %d", code)
	}
}
