package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"switchyard/internal/vlessecho"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"switchyard/test/socksclient"
)

const (
	loadFlows = 10000
	// loadWorkers open the flows side by side.
	loadWorkers = 16
	// loadRSSBound is the VmHWM the race-built process may reach holding
	// loadFlows flows and serving the listings and streams below. Measured
	// at 1.6 GiB: a Go heap of 160 MiB and stacks of 200 MiB (two
	// goroutines per flow), the rest the race detector's shadow of them;
	// the bound leaves half as much again.
	loadRSSBound = 2400 << 10 // KiB
)

// raiseFileLimit lifts the test process's soft descriptor limit to n for
// the test (and the hard one when it is lower, which needs
// CAP_SYS_RESOURCE); the switchyard it starts inherits it.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Cur >= n {
		return
	}
	lim := syscall.Rlimit{Cur: n, Max: max(n, orig.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raising the descriptor limit to %d (from %d, hard %d): %v", n, orig.Cur, orig.Max, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
}

// loadConn is the part of a Clash connection entry the load test reads.
type loadConn struct {
	ID       string `json:"id"`
	Upload   int64  `json:"upload"`
	Download int64  `json:"download"`
	Metadata struct {
		SourcePort      string `json:"sourcePort"`
		DestinationPort string `json:"destinationPort"`
	} `json:"metadata"`
}

type loadDelta struct {
	Type        string     `json:"type"`
	Connections []loadConn `json:"connections"`
	New         []loadConn `json:"new"`
	Update      []loadConn `json:"update"`
	Closed      []loadConn `json:"closed"`
}

func wsDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer s3cret"}})
	if err != nil {
		if resp != nil {
			t.Fatalf("%s: %v (%d)", url, err, resp.StatusCode)
		}
		t.Fatalf("%s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// 10,000 flows through a SOCKS inbound to an echo server (vlessGRPCEcho): GET
// /connections lists every one, the Clash WebSocket stream and the native
// delta stream deliver them, 100 flows that move and 100 that close show
// in the delta stream as exactly those updates and closes, and the
// process stays within its memory bound.
func TestLoadTenThousandFlows(t *testing.T) {
	raiseFileLimit(t, loadFlows+2000) // a client socket per flow, a little more
	apiPort := freeLoopbackPort(t)
	upstream := vlessGRPCEcho(t)
	p := start(t, fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "far"
type = "vless"
server = %q
uuid = %q
transport = { type = "grpc", service_name = "load" }

[route]
final = "far"
`, apiPort, upstream, vlessecho.UUID))
	base := fmt.Sprintf("127.0.0.1:%d", apiPort)
	const echo, echoPort = "echo.test:7", "7"

	began := time.Now()
	conns := make([]net.Conn, loadFlows)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	next := make(chan int, loadFlows)
	for i := range loadFlows {
		next <- i
	}
	close(next)
	for range loadWorkers {
		wg.Go(func() {
			for i := range next {
				c, err := socksclient.DialWithin(p.addr("socks-in"), echo, "", "", 20*time.Second)
				if err != nil {
					mu.Lock()
					fail = fmt.Errorf("flow %d: %w", i, err)
					mu.Unlock()
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	if fail != nil {
		t.Fatal(fail)
	}
	t.Logf("%d flows open in %v", loadFlows, time.Since(began).Round(time.Millisecond))
	byPort := map[string]int{}
	for i, c := range conns {
		byPort[strconv.Itoa(c.LocalAddr().(*net.TCPAddr).Port)] = i
	}

	// GET /connections: every flow, each to the echo server.
	at := time.Now()
	code, body := apiCall(t, http.MethodGet, "http://"+base+"/connections", "")
	took := time.Since(at)
	var snap struct {
		Connections []loadConn `json:"connections"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("GET /connections: %d, %d bytes", code, len(body))
	}
	t.Logf("GET /connections: %d entries, %d bytes in %v", len(snap.Connections), len(body), took.Round(time.Millisecond))
	idOf := map[int]string{}
	for _, c := range snap.Connections {
		i, ok := byPort[c.Metadata.SourcePort]
		if !ok || c.Metadata.DestinationPort != echoPort {
			t.Fatalf("an entry of no flow of the test: %+v", c)
		}
		idOf[i] = c.ID
	}
	if len(snap.Connections) != loadFlows || len(idOf) != loadFlows {
		t.Fatalf("GET /connections lists %d entries for %d flows (%d of them)", len(snap.Connections), loadFlows, len(idOf))
	}

	// The Clash WebSocket stream: a snapshot of every flow, twice. Both
	// are read before either is decoded: a client that reads slower than
	// the stream writes is dropped (a write has 5 s).
	clash := wsDial(t, "ws://"+base+"/connections?interval=500")
	clash.SetReadDeadline(time.Now().Add(30 * time.Second))
	var raw [2][]byte
	for n := range raw {
		_, r, err := clash.NextReader()
		if err == nil {
			raw[n], err = io.ReadAll(r)
		}
		if err != nil {
			t.Fatalf("WebSocket /connections message %d: %v", n+1, err)
		}
	}
	for n, b := range raw {
		var m struct {
			Connections []struct {
				ID string `json:"id"`
			} `json:"connections"`
		}
		if err := json.Unmarshal(b, &m); err != nil || len(m.Connections) != loadFlows {
			t.Fatalf("WebSocket /connections message %d: %d entries, %v", n+1, len(m.Connections), err)
		}
	}
	clash.Close()

	// The native delta stream: a snapshot, then only what changed.
	delta := wsDial(t, "ws://"+base+"/switchyard/v1/connections?interval=200")
	delta.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, fr, err := delta.NextReader()
	var firstRaw []byte
	if err == nil {
		firstRaw, err = io.ReadAll(fr)
	}
	var first loadDelta
	if err == nil {
		err = json.Unmarshal(firstRaw, &first)
	}
	if err != nil || first.Type != "snapshot" || len(first.Connections) != loadFlows {
		t.Fatalf("the delta stream's first message: %s with %d entries, %v", first.Type, len(first.Connections), err)
	}
	moved, closed := map[string]bool{}, map[string]bool{}
	for k := range 100 {
		i := k * (loadFlows / 100)
		c := conns[i]
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
			t.Fatalf("flow %d does not echo: %v", i, err)
		}
		moved[idOf[i]] = true
		j := i + 1
		conns[j].Close()
		closed[idOf[j]] = true
	}
	// An update may come between the ping's count and its echo's: the
	// counters of each moved flow reach 4 and 4.
	gotMoved, gotClosed := map[string]bool{}, map[string]bool{}
	counts := map[string]loadConn{}
	messages := 0
	for len(gotClosed) < len(closed) || len(gotMoved) < len(moved) {
		var d loadDelta
		if err := delta.ReadJSON(&d); err != nil {
			t.Fatalf("after %d deltas (%d of 100 moved, %d of 100 closed seen): %v", messages, len(gotMoved), len(gotClosed), err)
		}
		messages++
		if d.Type != "delta" || len(d.New) != 0 || len(d.Connections) != 0 {
			t.Fatalf("delta %d: %s, %d new, %d listed", messages, d.Type, len(d.New), len(d.Connections))
		}
		for _, u := range d.Update {
			if was := counts[u.ID]; !moved[u.ID] || u.Upload > 4 || u.Download > 4 || u.Upload < was.Upload || u.Download < was.Download {
				t.Fatalf("an update of a flow that did not move, or wrong counters: %+v after %+v", u, was)
			}
			counts[u.ID] = u
			if u.Upload == 4 && u.Download == 4 {
				gotMoved[u.ID] = true
			}
		}
		for _, c := range d.Closed {
			if !closed[c.ID] || gotClosed[c.ID] {
				t.Fatalf("a close of a flow that is open, or twice: %+v", c)
			}
			gotClosed[c.ID] = true
		}
	}
	t.Logf("100 updates and 100 closes in %d delta messages", messages)

	code, body = apiCall(t, http.MethodGet, "http://"+base+"/connections", "")
	snap.Connections = nil
	if code != 200 || json.Unmarshal([]byte(body), &snap) != nil || len(snap.Connections) != loadFlows-100 {
		t.Fatalf("GET /connections after 100 closes: %d, %d entries", code, len(snap.Connections))
	}
	if slices.ContainsFunc(snap.Connections, func(c loadConn) bool { return closed[c.ID] }) {
		t.Fatal("a closed flow is still listed")
	}

	rss := procStatus(t, p.cmd.Process.Pid, "VmRSS")
	hwm := procStatus(t, p.cmd.Process.Pid, "VmHWM")
	t.Logf("switchyard (race build) with %d flows: VmRSS %d MiB, VmHWM %d MiB", loadFlows, rss>>10, hwm>>10)
	if hwm > loadRSSBound {
		t.Fatalf("VmHWM %d KiB over the bound of %d KiB", hwm, loadRSSBound)
	}

	// Every flow closed: the table empties (and the process stops at
	// once).
	for _, c := range conns {
		c.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, body = apiCall(t, http.MethodGet, "http://"+base+"/connections", "")
		snap.Connections = nil
		if code != 200 || json.Unmarshal([]byte(body), &snap) != nil {
			t.Fatalf("GET /connections: %d %.200s", code, body)
		}
		if len(snap.Connections) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d flows still listed 30 s after every client closed", len(snap.Connections))
		}
	}
}

// The flows' far end: a TCP flow holds a descriptor at each of its ends in
// every process it crosses, and the descriptor limit here may be no more
// than 20,000 with no way to raise it (no CAP_SYS_RESOURCE): switchyard
// cannot hold 10,000 client sockets and 10,000 upstream ones. So the flows
// leave switchyard through VLESS over gRPC on cleartext HTTP/2, which
// carries every flow as a stream of one shared connection, to
// internal/vlessecho in this process: switchyard holds one descriptor per
// flow, and this process one per client.
func vlessGRPCEcho(t *testing.T) string {
	t.Helper()
	e, err := vlessecho.Start(4 * loadFlows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e.Addr().String()
}
