package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

type connsJSON struct {
	DownloadTotal int64 `json:"downloadTotal"`
	UploadTotal   int64 `json:"uploadTotal"`
	Memory        int64 `json:"memory"`
	Connections   []struct {
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
	} `json:"connections"`
}

func TestConnections(t *testing.T) {
	r := newRig(t, Options{})
	dst := echo(t)
	a := r.flow(t, dst)
	b := r.flow(t, dst)
	// A flow's counters move once the relay's write returned, which may
	// be just after the echo reached the client: read until they settle.
	var c connsJSON
	for deadline := time.Now().Add(5 * time.Second); ; {
		c = connsJSON{}
		r.get(t, "/connections", 200, &c)
		settled := c.UploadTotal == 8 && c.DownloadTotal == 8
		for _, x := range c.Connections {
			settled = settled && x.Upload == 4 && x.Download == 4
		}
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(c.Connections) != 2 || c.Memory <= 0 {
		t.Fatalf("connections: %+v", c)
	}
	x := c.Connections[0]
	m := x.Metadata
	host, port, _ := strings.Cut(dst, ":")
	if x.ID == "" || x.Upload != 4 || x.Download != 4 || x.Start.IsZero() || x.Rule != "final" || x.Payload == nil ||
		m.Network != "tcp" || m.Type != "Socks5" || m.SourceIP != "127.0.0.1" || m.SourcePort == "" ||
		m.DestinationIP != host || m.DestinationPort != port || m.InboundName != "socks-in" || m.DNSMode != "normal" ||
		m.ProcessPath == nil || m.InboundUser == nil || m.SniffHost == nil || m.RemoteDest == nil || m.SpecialProxy == nil {
		t.Fatalf("a connection: %+v", x)
	}
	if c.UploadTotal != 8 || c.DownloadTotal != 8 {
		t.Fatalf("totals: up %d down %d", c.UploadTotal, c.DownloadTotal)
	}

	// DELETE /connections/{id} ends exactly that flow; its bytes stay in
	// the totals.
	if code, body := r.do(t, "DELETE", "/connections/"+x.ID, "", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	other := b
	if x.ID != c.Connections[0].ID {
		other = a
	}
	waitClosed(t, a)
	if _, err := other.Write([]byte("more")); err != nil {
		t.Fatalf("the other flow: %v", err)
	}
	buf := make([]byte, 4)
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := other.Read(buf); err != nil {
		t.Fatalf("the other flow ended too: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		c = connsJSON{}
		r.get(t, "/connections", 200, &c)
		if (c.UploadTotal == 12 && c.DownloadTotal == 12) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(c.Connections) != 1 || c.Connections[0].ID == x.ID {
		t.Fatalf("after the delete: %+v", c.Connections)
	}
	if c.UploadTotal != 12 || c.DownloadTotal != 12 {
		t.Fatalf("totals after a close: up %d down %d", c.UploadTotal, c.DownloadTotal)
	}
	if code, _ := r.do(t, "DELETE", "/connections/"+x.ID, "", ""); code != 404 {
		t.Fatalf("a second delete: %d", code)
	}

	if code, _ := r.do(t, "DELETE", "/connections", "", ""); code != 204 {
		t.Fatalf("delete all: %d", code)
	}
	waitClosed(t, other)
	r.get(t, "/connections", 200, &c)
	if len(c.Connections) != 0 || c.UploadTotal != 12 {
		t.Fatalf("after delete all: %+v", c)
	}
}

func dialWS(t *testing.T, r *rig, path string, h http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.base, "http")+path, h)
	if err != nil {
		if resp != nil {
			t.Fatalf("ws %s: %v (%d)", path, err, resp.StatusCode)
		}
		t.Fatalf("ws %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConnectionsWebSocket(t *testing.T) {
	r := newRig(t, Options{})
	c := dialWS(t, r, "/connections?interval=100", nil)
	var s connsJSON
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := c.ReadJSON(&s); err != nil || len(s.Connections) != 0 {
		t.Fatalf("first: %+v %v", s, err)
	}
	r.flow(t, echo(t))
	for range 20 {
		if err := c.ReadJSON(&s); err != nil {
			t.Fatal(err)
		}
		if len(s.Connections) == 1 {
			return
		}
	}
	t.Fatal("the flow never showed")
}

func TestTrafficAndMemory(t *testing.T) {
	r := newRig(t, Options{})
	for _, path := range []string{"/traffic", "/memory"} {
		c := dialWS(t, r, path, nil)
		var v map[string]int64
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := c.ReadJSON(&v); err != nil {
			t.Fatal(err)
		}
		if path == "/traffic" {
			if _, ok := v["up"]; !ok {
				t.Fatalf("traffic: %v", v)
			}
		} else if v["inuse"] <= 0 {
			t.Fatalf("memory: %v", v)
		}
		c.Close()
	}
	// Chunked HTTP: two lines, a second apart; the traffic reports the
	// flow's bytes in between.
	resp, err := http.Get(r.base + "/traffic")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var first, second map[string]int64
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &first) != nil {
		t.Fatalf("first line: %q", sc.Text())
	}
	r.flow(t, echo(t))
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &second) != nil {
		t.Fatalf("second line: %q", sc.Text())
	}
	if second["up"] < 3 || second["down"] < 3 {
		t.Fatalf("traffic over a flow of 4 bytes each way: %v", second)
	}
	mresp, err := http.Get(r.base + "/memory")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	var mem map[string]int64
	if err := json.NewDecoder(mresp.Body).Decode(&mem); err != nil || mem["inuse"] <= 0 {
		t.Fatalf("memory: %v %v", mem, err)
	}
}
