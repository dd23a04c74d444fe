package e2e

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
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
`, apiPort, upstream, loadUUID))
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

// The flows' far end. A TCP flow holds a descriptor at each of its ends in
// every process it crosses, and the descriptor limit here may be no more
// than 20,000 with no way to raise it (no CAP_SYS_RESOURCE): switchyard
// cannot hold 10,000 client sockets and 10,000 upstream ones. So the flows
// leave switchyard through VLESS over gRPC on cleartext HTTP/2, which
// carries every flow as a stream of one shared connection, to the echo
// server below, in this process, which answers each stream's VLESS header
// and echoes its payload: switchyard holds one descriptor per flow, and
// this process one per client.

const loadUUID = "b831381d-6324-4d53-ad4f-8cda48b30811"

// vlessGRPCEcho serves /load/Tun (gun mode) over h2c: each call is one
// VLESS flow whose payload is echoed. Written apart from switchyard's own
// codecs: a gRPC message is a flag byte, a 4-byte length and a protobuf
// Hunk (field 1, bytes).
func vlessGRPCEcho(t *testing.T) string {
	t.Helper()
	ln := listenTCP(t)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:   http.HandlerFunc(serveVLESSEcho),
		Protocols: &protocols,
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: 4 * loadFlows},
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String()
}

func serveVLESSEcho(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/load/Tun" || r.ProtoMajor != 2 {
		http.Error(w, "not a gun call", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	rc := http.NewResponseController(w)
	in := bufio.NewReader(r.Body)
	first := true
	for {
		data, err := readHunk(in)
		if err != nil {
			w.Header().Set("Grpc-Status", "0")
			return
		}
		if first {
			first = false
			if data, err = skipVLESSRequest(data); err != nil {
				w.Header().Set("Grpc-Status", "13")
				return
			}
			if _, err := w.Write(hunk([]byte{0, 0})); err != nil { // version 0, no addons
				return
			}
		}
		if len(data) > 0 {
			if _, err := w.Write(hunk(data)); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// readHunk reads one gRPC message and returns the Hunk's data.
func readHunk(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	if len(msg) == 0 {
		return nil, nil
	}
	if msg[0] != 0x0a {
		return nil, fmt.Errorf("hunk field tag %#x", msg[0])
	}
	n, k := binary.Uvarint(msg[1:])
	if k <= 0 || uint64(len(msg)-1-k) < n {
		return nil, errors.New("hunk length")
	}
	return msg[1+k : 1+k+int(n)], nil
}

// hunk frames data as one gRPC message of a Hunk.
func hunk(data []byte) []byte {
	pb := binary.AppendUvarint([]byte{0x0a}, uint64(len(data)))
	pb = append(pb, data...)
	out := make([]byte, 5, 5+len(pb))
	binary.BigEndian.PutUint32(out[1:], uint32(len(pb)))
	return append(out, pb...)
}

// skipVLESSRequest checks a VLESS TCP request header (version 0, the
// load test's UUID, addons, command, port, address) and returns what
// follows it. The header comes whole in the first message.
func skipVLESSRequest(b []byte) ([]byte, error) {
	bad := errors.New("not a VLESS request of the load test")
	if len(b) < 18 || b[0] != 0 || fmt.Sprintf("%x-%x-%x-%x-%x", b[1:5], b[5:7], b[7:9], b[9:11], b[11:17]) != loadUUID {
		return nil, bad
	}
	b = b[17:]
	if len(b) < 1+int(b[0]) {
		return nil, bad
	}
	b = b[1+int(b[0]):]
	if len(b) < 4 || b[0] != 1 { // TCP
		return nil, bad
	}
	b = b[3:] // command, port
	switch b[0] {
	case 1:
		b = b[1:]
		if len(b) < 4 {
			return nil, bad
		}
		return b[4:], nil
	case 2:
		if len(b) < 2 || len(b) < 2+int(b[1]) {
			return nil, bad
		}
		return b[2+int(b[1]):], nil
	case 3:
		if len(b) < 17 {
			return nil, bad
		}
		return b[17:], nil
	}
	return nil, bad
}
