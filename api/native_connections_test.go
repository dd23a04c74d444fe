package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/track"
)

type countsJSON struct {
	ID       string `json:"id"`
	Upload   int64  `json:"upload"`
	Download int64  `json:"download"`
}

type deltaJSON struct {
	Type          string `json:"type"`
	UploadTotal   int64  `json:"uploadTotal"`
	DownloadTotal int64  `json:"downloadTotal"`
	// Connections (a snapshot's) and New (a delta's) are Clash entries.
	Connections []json.RawMessage `json:"connections"`
	New         []json.RawMessage `json:"new"`
	Update      []countsJSON      `json:"update"`
	Closed      []countsJSON      `json:"closed"`
}

// entries decodes Clash entries as connsJSON does.
func entries(t *testing.T, raw []json.RawMessage) []connEntry {
	t.Helper()
	var out []connEntry
	for _, r := range raw {
		var c connEntry
		if err := json.Unmarshal(r, &c); err != nil {
			t.Fatalf("%v in %s", err, r)
		}
		out = append(out, c)
	}
	return out
}

type connEntry = struct {
	ID       string    `json:"id"`
	Upload   int64     `json:"upload"`
	Download int64     `json:"download"`
	Start    time.Time `json:"start"`
	Chains   []string  `json:"chains"`
	Rule     string    `json:"rule"`
	Payload  *string   `json:"rulePayload"`
	Metadata struct {
		Network         string  `json:"network"`
		Type            string  `json:"type"`
		SourceIP        string  `json:"sourceIP"`
		DestinationIP   string  `json:"destinationIP"`
		SourcePort      string  `json:"sourcePort"`
		DestinationPort string  `json:"destinationPort"`
		Host            string  `json:"host"`
		DNSMode         string  `json:"dnsMode"`
		ProcessPath     *string `json:"processPath"`
		InboundName     string  `json:"inboundName"`
		InboundUser     *string `json:"inboundUser"`
		SniffHost       *string `json:"sniffHost"`
		RemoteDest      *string `json:"remoteDestination"`
		SpecialProxy    *string `json:"specialProxy"`
	} `json:"metadata"`
}

func readDelta(t *testing.T, c interface{ ReadJSON(any) error }) deltaJSON {
	t.Helper()
	var d deltaJSON
	if err := c.ReadJSON(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// Through real flows: a snapshot first, then a new flow in full, its
// counters as updates, and a deleted flow as closed with its final
// counters; totals keep the closed flow's bytes.
func TestNativeConnectionsWebSocket(t *testing.T) {
	r := newRig(t, Options{})
	dst := echo(t)
	a := r.flow(t, dst)
	c := dialWS(t, r, "/switchyard/v1/connections?interval=100", nil)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	first := readDelta(t, c)
	if first.Type != "snapshot" || len(first.Connections) != 1 || first.New != nil {
		t.Fatalf("first: %+v", first)
	}
	aid := entries(t, first.Connections)[0].ID

	b := r.flow(t, dst)
	var got connEntry
	for got.ID == "" {
		d := readDelta(t, c)
		if d.Type != "delta" {
			t.Fatalf("a second message: %+v", d)
		}
		for _, u := range d.Update {
			if u.ID != aid {
				t.Fatalf("an update of a flow that did not move: %+v", u)
			}
		}
		if n := entries(t, d.New); len(n) == 1 {
			got = n[0]
		} else if len(n) > 1 {
			t.Fatalf("new: %+v", n)
		}
	}
	m := got.Metadata
	host, port, _ := strings.Cut(dst, ":")
	if got.ID == aid || got.Start.IsZero() || got.Rule != "final" || got.Payload == nil || !slices.Equal(got.Chains, []string{"d1", "pick"}) ||
		m.Network != "tcp" || m.Type != "Socks5" || m.SourceIP != "127.0.0.1" || m.DestinationIP != host || m.DestinationPort != port ||
		m.InboundName != "socks-in" || m.DNSMode != "normal" || m.ProcessPath == nil || m.SniffHost == nil || m.RemoteDest == nil {
		t.Fatalf("a new entry: %+v", got)
	}
	bid := got.ID

	// b's counters move: an update of b alone, up to 8 each way.
	b.Write([]byte("more"))
	io.ReadFull(b, make([]byte, 4))
	for u := (countsJSON{}); u.Upload != 8 || u.Download != 8; {
		d := readDelta(t, c)
		for _, x := range d.Update {
			if x.ID != bid {
				t.Fatalf("an update of a flow that did not move: %+v", x)
			}
			u = x
		}
		if len(d.New) != 0 || len(d.Closed) != 0 {
			t.Fatalf("nothing opened or closed: %+v", d)
		}
	}

	// DELETE b: closed with its final counters, the totals keep them.
	if code, body := r.do(t, "DELETE", "/connections/"+bid, "", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	waitClosed(t, b)
	for {
		d := readDelta(t, c)
		if len(d.Closed) == 0 {
			continue
		}
		if len(d.Closed) != 1 || d.Closed[0] != (countsJSON{ID: bid, Upload: 8, Download: 8}) {
			t.Fatalf("closed: %+v", d.Closed)
		}
		if d.UploadTotal != 12 || d.DownloadTotal != 12 {
			t.Fatalf("totals: %+v", d)
		}
		break
	}
	_ = a
}

// Without an upgrade the stream is JSON lines; a bad interval is refused.
func TestNativeConnectionsChunkedAndInterval(t *testing.T) {
	r := newRig(t, Options{})
	for _, bad := range []string{"0", "99", "60001", "x", "-5"} {
		code, body := r.do(t, "GET", "/switchyard/v1/connections?interval="+bad, "", "")
		if code != 400 || !strings.Contains(string(body), "interval must be") {
			t.Fatalf("interval=%s: %d %s", bad, code, body)
		}
	}
	resp, err := http.Get(r.base + "/switchyard/v1/connections?interval=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var first, second deltaJSON
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &first) != nil || first.Type != "snapshot" {
		t.Fatalf("first line: %q", sc.Text())
	}
	r.flow(t, echo(t))
	for len(second.New) == 0 {
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &second) != nil || second.Type != "delta" {
			t.Fatalf("a line: %q", sc.Text())
		}
	}
}

// nopConn is a conn for flows registered straight into the tracker.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

func fakeMeta(i int) track.Meta {
	return track.Meta{
		Network:     netx.TCP,
		Inbound:     "socks-in",
		Source:      netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(10000+i%50000)),
		Destination: netx.DomainAddr("host"+strings.Repeat("x", i%7)+".example.com", 443),
		Rule:        "final",
		Outbound:    "d1@v1",
		Chain:       []string{"pick", "d1"},
	}
}

func openFake(r *rig, n int) []*track.Conn {
	out := make([]*track.Conn, n)
	for i := range out {
		out[i] = r.sv.Tracker().Conn(fakeMeta(i), nopConn{})
	}
	return out
}

func decodeMessage(t *testing.T, f *deltaFeed) deltaJSON {
	t.Helper()
	var b strings.Builder
	if err := f.message(&b); err != nil {
		t.Fatal(err)
	}
	var d deltaJSON
	if err := json.Unmarshal([]byte(b.String()), &d); err != nil {
		t.Fatalf("%v in %s", err, b.String())
	}
	return d
}

// The feed against the tracker directly: flows opened and closed between
// two messages show in neither list; only moved counters are updates; a
// subscriber behind the closed log is sent a snapshot again.
func TestDeltaFeed(t *testing.T) {
	r := newRig(t, Options{})
	conns := openFake(r, 5)
	f := newDeltaFeed(r.srv)
	if d := decodeMessage(t, f); d.Type != "snapshot" || len(d.Connections) != 5 {
		t.Fatalf("snapshot: %+v", d)
	}
	if d := decodeMessage(t, f); d.Type != "delta" || len(d.New)+len(d.Update)+len(d.Closed) != 0 {
		t.Fatalf("nothing changed: %+v", d)
	}
	conns[1].ObserveWrite(10)
	conns[3].ObserveRead(7)
	conns[4].ObserveWrite(2)
	conns[4].Close()
	brief := r.sv.Tracker().Conn(fakeMeta(9), nopConn{})
	brief.ObserveWrite(100)
	brief.Close()
	late := r.sv.Tracker().Conn(fakeMeta(10), nopConn{})
	defer late.Close()
	d := decodeMessage(t, f)
	id := func(c *track.Conn) string { return itoa(c.ID()) }
	if want := []countsJSON{{id(conns[1]), 10, 0}, {id(conns[3]), 0, 7}}; !slices.Equal(d.Update, want) {
		t.Fatalf("update %+v, want %+v", d.Update, want)
	}
	if want := []countsJSON{{id(conns[4]), 2, 0}}; !slices.Equal(d.Closed, want) {
		t.Fatalf("closed %+v, want %+v", d.Closed, want)
	}
	if n := entries(t, d.New); len(n) != 1 || n[0].ID != id(late) || n[0].Metadata.InboundName != "socks-in" {
		t.Fatalf("new %+v", n)
	}
	if d.UploadTotal != 112 || d.DownloadTotal != 7 {
		t.Fatalf("totals %d %d", d.UploadTotal, d.DownloadTotal)
	}

	// More closes than the log holds: a snapshot again, then deltas.
	for range track.ClosedLogSize + 1 {
		r.sv.Tracker().Conn(fakeMeta(1), nopConn{}).Close()
	}
	conns[0].Close()
	if d := decodeMessage(t, f); d.Type != "snapshot" || len(d.Connections) != 4 {
		t.Fatalf("after the log overflowed: %s %d", d.Type, len(d.Connections))
	}
	conns[2].ObserveWrite(1)
	if d := decodeMessage(t, f); d.Type != "delta" || len(d.Update) != 1 || d.Update[0].ID != id(conns[2]) {
		t.Fatalf("after the resync: %+v", d)
	}
	for _, c := range conns {
		c.Close()
	}
}

func itoa(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// A message's cost follows the changes: with 10,000 open flows and none
// moving, a message renders nothing and allocates (almost) nothing; so
// does a listing of GET /connections once every flow was rendered. The
// bounds hold under the race detector too: its pools drop a quarter of
// what is put back, which costs a call two allocations (a new scratch and
// its buffer) a quarter of the time, far from the bound of 4 a call, while
// rendering every flow would cost thousands.
func TestCostsAtTenThousandFlows(t *testing.T) {
	r := newRig(t, Options{})
	conns := openFake(r, 10000)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	f := newDeltaFeed(r.srv)
	f.message(io.Discard)
	f.message(io.Discard)
	var b countingWriter
	if allocs := testing.AllocsPerRun(20, func() { b = 0; f.message(&b) }); allocs > 4 {
		t.Fatalf("%v allocations per message with nothing changed", allocs)
	}
	if b > 200 {
		t.Fatalf("a message of %d bytes with nothing changed", b)
	}
	for i := range 100 {
		conns[i*97].ObserveWrite(1)
	}
	b = 0
	f.message(&b)
	if b > 100*60 {
		t.Fatalf("a message of %d bytes for 100 updates", b)
	}
	r.srv.writeSnapshot(io.Discard)
	if allocs := testing.AllocsPerRun(5, func() { r.srv.writeSnapshot(io.Discard) }); allocs > 4 {
		t.Fatalf("%v allocations per listing of rendered flows", allocs)
	}
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

func FuzzDeltaInterval(f *testing.F) {
	for _, s := range []string{"", "100", "60000", "99", "60001", "-1", "1e3", "99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDeltaInterval(s)
		if err == nil && (d < deltaIntervalMin || d > deltaIntervalMax) {
			t.Fatalf("%q: %v accepted", s, d)
		}
	})
}

// Whatever a flow's names hold (quotes, control characters, bytes that are
// not UTF-8: a sniffed host comes from the network), the listing and the
// delta stream are valid JSON that decodes to those names as
// encoding/json renders them.
func FuzzConnectionsJSON(f *testing.F) {
	f.Add("example.com", "alice", "sni.example")
	f.Add("a\"b\\c", "\x00\x1f\u2028", "\xff\xfe")
	srv, _ := benchRig(f, 0)
	tr := srv.b.Tracker()
	f.Fuzz(func(t *testing.T, host, user, sniffed string) {
		m := fakeMeta(1)
		m.Destination.Name, m.User, m.Sniffed = host, user, sniffed
		m.Chain = []string{host, user}
		feed := newDeltaFeed(srv)
		feed.message(io.Discard)
		c := tr.Conn(m, nopConn{})
		defer c.Close()
		c.ObserveRead(3)
		var list, delta strings.Builder
		if err := srv.writeSnapshot(&list); err != nil {
			t.Fatal(err)
		}
		if err := feed.message(&delta); err != nil {
			t.Fatal(err)
		}
		want := func(s string) string { var v string; b, _ := json.Marshal(s); json.Unmarshal(b, &v); return v }
		var snap connsJSON
		if err := json.Unmarshal([]byte(list.String()), &snap); err != nil || len(snap.Connections) != 1 {
			t.Fatalf("listing %q: %v", list.String(), err)
		}
		var d deltaJSON
		if err := json.Unmarshal([]byte(delta.String()), &d); err != nil || len(d.New) != 1 {
			t.Fatalf("delta %q: %v", delta.String(), err)
		}
		shown := host // the host, else the sniffed name
		if shown == "" {
			shown = sniffed
		}
		for _, e := range append(snap.Connections, entries(t, d.New)...) {
			if e.Metadata.Host != want(shown) || *e.Metadata.InboundUser != want(user) || *e.Metadata.SniffHost != want(sniffed) ||
				e.Download != 3 || !slices.Equal(e.Chains, []string{want(user), want(host)}) {
				t.Fatalf("entry %+v for %q %q %q", e, host, user, sniffed)
			}
		}
	})
}

// A subscriber that stops reading is disconnected once a message has
// waited wsWriteTimeout, and holds nothing up meanwhile: flows still open
// and close, and other readers are served.
func TestStalledSubscriberIsDropped(t *testing.T) {
	r := newRig(t, Options{})
	conns := openFake(r, 10000) // about 5 MB a message: the socket buffers fill at once
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	c := dialWS(t, r, "/connections?interval=100", nil)
	time.Sleep(time.Second) // the server's writes now wait for a reader that does not read
	at := time.Now()
	for range 100 {
		r.sv.Tracker().Conn(fakeMeta(0), nopConn{}).Close()
	}
	var other map[string]int64
	o := dialWS(t, r, "/traffic", nil) // a stream whose messages are small, so it is not slow itself
	o.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := o.ReadJSON(&other); err != nil {
		t.Fatalf("another subscriber: %v", err)
	}
	if d := time.Since(at); d > 3*time.Second {
		t.Fatalf("flows and another subscriber waited %v on a stalled one", d)
	}
	// Past the write's deadline, what was sent before the stall is still
	// readable, then the end.
	time.Sleep(time.Until(at.Add(wsWriteTimeout + time.Second)))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, m, err := c.NextReader()
		if err == nil {
			_, err = io.Copy(io.Discard, m)
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the stalled subscriber was not disconnected")
			}
			break
		}
	}
}
