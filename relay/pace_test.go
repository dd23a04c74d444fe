package relay_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/relay"
	"switchyard/track"
)

// A flow of a paced user keeps the splice path in both directions and moves
// no faster than the user's rate: 1 Mbps, measured over a window.
func TestAPacedFlowSplicesAtItsRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*net.TCPConn) net.Conn
		want relay.Path
	}{
		{"splice", func(c *net.TCPConn) net.Conn { return c }, relay.PathSplice},
		{"userspace", func(c *net.TCPConn) net.Conn { return plainConn{c} }, relay.PathCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := track.New()
			tr.SetUsers([]track.UserConfig{{Name: "u", UpMbps: 1, DownMbps: 1}})
			s := tr.OpenSession(track.SessionInfo{User: "u"})
			defer s.End()
			client, inbound := tcpPair(t)
			upstream, server := tcpPair(t)
			up := tr.Conn(track.Meta{Outbound: "direct@v1", Session: s.ID()}, tc.wrap(upstream))
			done := relayed(tc.wrap(inbound), up, time.Minute)

			// Both ends offer far more than the rate lets through; each
			// receiver counts what arrives.
			var toServer, toClient atomic.Int64
			counter := func(c net.Conn, n *atomic.Int64) {
				b := make([]byte, 64<<10)
				for {
					m, err := c.Read(b)
					n.Add(int64(m))
					if err != nil {
						return
					}
				}
			}
			go counter(server, &toServer)
			go counter(client, &toClient)
			go client.Write(make([]byte, 8<<20))
			go server.Write(make([]byte, 8<<20))

			const window = 2 * time.Second
			time.Sleep(window)
			limit := int64(1.5*125_000*window.Seconds()) + 128<<10
			for _, d := range []struct {
				what string
				n    int64
			}{{"upload", toServer.Load()}, {"download", toClient.Load()}} {
				if d.n > limit || d.n < 125_000/2 {
					t.Errorf("%s moved %d bytes in %v at 1 Mbps, want between %d and %d", d.what, d.n, window, 125_000/2, limit)
				}
			}
			client.Close()
			server.Close()
			res := wait(t, done, "the relay")
			if res.PathAToB != tc.want || res.PathBToA != tc.want {
				t.Fatalf("paths %v and %v, want %v", res.PathAToB, res.PathBToA, tc.want)
			}
			if u, _ := tr.User("u"); u.Up < toServer.Load() || u.Down < toClient.Load() {
				t.Fatalf("user totals %+v below what arrived (%d up, %d down)", u, toServer.Load(), toClient.Load())
			}
		})
	}
}
