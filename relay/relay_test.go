package relay_test

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"switchyard/relay"
	"switchyard/track"
)

// A relay between an inbound TCP conn and an upstream wrapped by the
// tracker: both directions splice beneath the wrapper, the wrapper hears the
// exact byte counts, and a half-close lets the other direction go on.
func TestSpliceBeneathAnObservedWrapper(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*net.TCPConn) net.Conn
		want relay.Path
	}{
		{"tcp", func(c *net.TCPConn) net.Conn { return c }, relay.PathSplice},
		{"userspace", func(c *net.TCPConn) net.Conn { return plainConn{c} }, relay.PathCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, inbound := tcpPair(t)
			upstream, server := tcpPair(t)
			tr := track.New()
			up := tr.Conn(track.Meta{Outbound: "direct@v1"}, tc.wrap(upstream))
			done := relayed(tc.wrap(inbound), up, time.Minute)

			request, response := pattern(3<<20, 1), pattern(1<<20, 2)
			serverGot := readAll(server)
			go func() {
				client.Write(request)
				client.CloseWrite()
			}()
			same(t, "upstream received", wait(t, serverGot, "the request"), request)

			// The client has half-closed; the server answers afterwards.
			time.Sleep(50 * time.Millisecond)
			clientGot := readAll(client)
			if _, err := server.Write(response); err != nil {
				t.Fatalf("the server could not answer after the client's half-close: %v", err)
			}
			server.CloseWrite()
			same(t, "client received", wait(t, clientGot, "the response"), response)

			res := wait(t, done, "the relay")
			if res.PathAToB != tc.want || res.PathBToA != tc.want {
				t.Fatalf("paths %v and %v, want %v", res.PathAToB, res.PathBToA, tc.want)
			}
			if res.AToB != 3<<20 || res.BToA != 1<<20 {
				t.Fatalf("relayed %d and %d bytes", res.AToB, res.BToA)
			}
			if flows := tr.Flows(); len(flows) != 0 {
				t.Fatal("the relay did not close the tracked conn")
			}
		})
	}
}

// What the relay splices beneath a wrapper is reported to it exactly, and
// nothing goes through the wrapper's own Read and Write.
func TestObservedCountsAreExact(t *testing.T) {
	client, inbound := tcpPair(t)
	upstream, server := tcpPair(t)
	obs := &counting{Conn: upstream}
	done := relayed(inbound, obs, time.Minute)

	request, response := pattern(3<<20, 3), pattern(1<<20, 4)
	serverGot := readAll(server)
	go func() {
		client.Write(request)
		client.CloseWrite()
	}()
	same(t, "upstream received", wait(t, serverGot, "the request"), request)
	clientGot := readAll(client)
	server.Write(response)
	server.CloseWrite()
	same(t, "client received", wait(t, clientGot, "the response"), response)
	res := wait(t, done, "the relay")
	if res.PathAToB != relay.PathSplice || res.PathBToA != relay.PathSplice {
		t.Fatalf("paths %v and %v", res.PathAToB, res.PathBToA)
	}
	if obs.written.Load() != 3<<20 || obs.read.Load() != 1<<20 {
		t.Fatalf("observed %d written and %d read, want %d and %d", obs.written.Load(), obs.read.Load(), 3<<20, 1<<20)
	}
	if obs.direct.Load() != 0 {
		t.Fatalf("%d bytes went through the wrapper's Read or Write instead of splice", obs.direct.Load())
	}
}

// A conn that is not TCP beneath its wrappers is copied in userspace.
// Bulk and small writes both ways through userspace copies, one of them
// reading a plain TCP source (which it waits on holding no buffer, then
// reads in the small or the large buffer by what is queued), arrive whole
// and in order.
func TestCopiesMoveBulkAndTrickles(t *testing.T) {
	for _, p := range paths[1:] {
		t.Run(p.name, func(t *testing.T) {
			a, b, client, server := pairs(t, p.mode)
			done := relayed(a, b, time.Minute)
			serverGot, clientGot := readAll(server), readAll(client)
			up, down := pattern(3<<20+17, 8), pattern(2<<20+5, 9)
			go func() {
				for i := 0; i < len(down); {
					n := min(len(down)-i, []int{1, 100, 4096, 4097, 64 << 10}[i%5])
					server.Write(down[i : i+n])
					i += n
				}
				server.(*net.TCPConn).CloseWrite()
			}()
			for i := 0; i < len(up); {
				n := min(len(up)-i, []int{64 << 10, 3, 4096, 5000, 1}[i%5])
				client.Write(up[i : i+n])
				i += n
			}
			client.(*net.TCPConn).CloseWrite()
			same(t, "server received", wait(t, serverGot, "the upload"), up)
			same(t, "client received", wait(t, clientGot, "the download"), down)
			if res := wait(t, done, "the relay"); res.AToB != int64(len(up)) || res.BToA != int64(len(down)) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestNonTCPConnsAreCopied(t *testing.T) {
	client, a := net.Pipe()
	b, server := net.Pipe()
	tcpClient, tcpIn := tcpPair(t)
	for _, tc := range []struct {
		name          string
		a, b          net.Conn
		client, serve net.Conn
	}{
		{"pipe to pipe", a, b, client, server},
		{"tcp to pipe", tcpIn, nil, tcpClient, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.b == nil {
				tc.b, tc.serve = net.Pipe()
			}
			done := relayed(tc.a, tc.b, time.Minute)
			got := readAll(tc.serve)
			if _, err := tc.client.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			tc.client.Close()
			if g := wait(t, got, "the relayed bytes"); string(g) != "hello" {
				t.Fatalf("relayed %q", g)
			}
			res := wait(t, done, "the relay")
			if res.PathAToB != relay.PathCopy || res.PathBToA != relay.PathCopy || res.AToB != 5 {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// A half-closed flow that waits on one side only still ends at once when its
// owner stops.
func TestOwnerStopEndsAHalfClosedFlow(t *testing.T) {
	client, a := tcpPair(t)
	b, server := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan relay.Result, 1)
	go func() { done <- relay.Pipe(ctx, a, b, time.Hour) }()
	client.CloseWrite()
	buf := make([]byte, 1)
	server.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := server.Read(buf); err != io.EOF {
		t.Fatalf("the half-close did not reach the server: %v", err)
	}
	// The server never answers nor closes: only the owner can end the flow.
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("cancelling the owner's context did not end the relay")
	}
}

// An idle spliced flow holds no pipe: its descriptors are its two sockets
// per side and nothing more.
func TestAnIdleSplicedFlowHoldsNoPipe(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	const flows = 20
	var clients []net.Conn
	before := fds()
	for range flows {
		client, a := tcpPair(t)
		b, server := tcpPair(t)
		go relay.Pipe(context.Background(), a, b, time.Minute)
		// One exchange each way, then silence.
		client.Write([]byte("x"))
		io.ReadFull(server, make([]byte, 1))
		server.Write([]byte("y"))
		io.ReadFull(client, make([]byte, 1))
		clients = append(clients, client, server)
	}
	time.Sleep(100 * time.Millisecond)
	// Pipes returned to the standard library's pool are closed by the
	// collector; only pipes a flow holds survive it.
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	grown := fds() - before
	// Four sockets per flow (two pairs); a held pipe pair per direction
	// would add four more.
	if grown > 4*flows+4 {
		t.Fatalf("%d descriptors for %d idle flows: pipes are held while idle", grown, flows)
	}
	for _, c := range clients {
		c.Close()
	}
}
