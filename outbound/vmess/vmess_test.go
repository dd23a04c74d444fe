package vmess

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	protocol "switchyard/protocol/vmess"
	"switchyard/spec"
)

var echoDst = netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 7}

func tcpFlow(dst netx.Addr) netx.Flow { return netx.Flow{Network: netx.TCP, Dst: dst} }
func udpFlow(dst netx.Addr) netx.Flow { return netx.Flow{Network: netx.UDP, Dst: dst} }

func TestStreamEchoEachSecurity(t *testing.T) {
	for _, sec := range securities {
		t.Run(sec, func(t *testing.T) {
			addr := newServer(t, echo)
			o := newOutbound(t, addr, sec)
			c, err := o.DialStream(context.Background(), tcpFlow(netx.DomainAddr("example.com", 80)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			payload := make([]byte, 1<<20+17)
			rand.Read(payload)
			errc := make(chan error, 1)
			go func() {
				// Writes of the relay's size and odd ones.
				p := payload
				for i := 0; len(p) > 0; i++ {
					n := min(len(p), []int{32 << 10, 1, 5000, 40000}[i%4])
					if _, err := c.Write(p[:n]); err != nil {
						errc <- err
						return
					}
					p = p[n:]
				}
				errc <- c.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("echo of %d bytes differs from the %d sent", len(got), len(payload))
			}
			if _, err := c.Write([]byte("x")); err == nil {
				t.Fatal("a write after CloseWrite succeeded")
			}
		})
	}
}

// A stream is cut in chunks no larger than Xray's client cuts it (8 KiB
// buffers): the largest payload of a chunk is 8,110 bytes sealed and padded,
// 8,192 in clear. Xray's server panics on a larger clear chunk.
func TestStreamChunksAreSizedAsXrayClientSizesThem(t *testing.T) {
	for _, tc := range []struct {
		sec string
		max int
	}{{"aes-128-gcm", 8110}, {"chacha20-poly1305", 8110}, {"none", 8192}} {
		t.Run(tc.sec, func(t *testing.T) {
			largest := make(chan int, 1)
			addr := newServer(t, func(s *session) {
				n := 0
				defer func() { largest <- n }()
				for {
					p, err := s.in.ReadChunk(s.r)
					if err != nil {
						return
					}
					n = max(n, len(p))
				}
			})
			c, err := newOutbound(t, addr, tc.sec).DialStream(context.Background(), tcpFlow(echoDst))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(make([]byte, 200<<10)); err != nil {
				t.Fatal(err)
			}
			if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if n := <-largest; n != tc.max {
				t.Fatalf("the largest chunk carried %d bytes, want %d", n, tc.max)
			}
		})
	}
}

func TestPacketEchoEachSecurity(t *testing.T) {
	for _, sec := range securities {
		t.Run(sec, func(t *testing.T) {
			var target netx.Addr
			addr := newServer(t, func(s *session) {
				target = s.req.Dst
				echo(s)
			})
			o := newOutbound(t, addr, sec)
			l, err := o.DialPacket(context.Background(), udpFlow(echoDst))
			if err != nil {
				t.Fatal(err)
			}
			if !o.CarriesUDP() {
				t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
			}
			defer l.Close()
			buf := make([]byte, 64<<10)
			for _, size := range []int{1, 2, 100, 1400, l.(*packetLink).enc.MaxPayload()} {
				p := make([]byte, size)
				rand.Read(p)
				// to names another peer: a VMess link has one target.
				if err := l.WritePacket(p, netx.DomainAddr("elsewhere.example", 1)); err != nil {
					t.Fatal(err)
				}
				n, from, err := l.ReadPacket(buf)
				if err != nil {
					t.Fatal(err)
				}
				if from != echoDst || !bytes.Equal(buf[:n], append([]byte("re:"), p...)) {
					t.Fatalf("reply of %d bytes from %v", n, from)
				}
			}
			if target != echoDst {
				t.Fatalf("the request named %v", target)
			}
			if err := l.WritePacket(nil, echoDst); err != nil {
				t.Fatalf("an empty datagram: %v", err)
			}
		})
	}
}

func TestPacketLargerThanTheBufferIsRefused(t *testing.T) {
	addr := newServer(t, echo)
	o := newOutbound(t, addr, "aes-128-gcm")
	l, err := o.DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.WritePacket(make([]byte, l.(*packetLink).enc.MaxPayload()+1), echoDst)
	if !errors.Is(err, proxyconn.ErrFrameTooLarge) || !strings.Contains(err.Error(), "frame larger than the client runtime's buffer") {
		t.Fatalf("%v", err)
	}
	// The refusal is for that datagram only.
	if err := l.WritePacket([]byte("ok"), echoDst); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if n, _, err := l.ReadPacket(buf); err != nil || string(buf[:n]) != "re:ok" {
		t.Fatalf("%q %v", buf[:n], err)
	}
}

// readAfterHandshake dials a stream to a server that runs answer, and returns
// the error of reading it.
func readAfterHandshake(t *testing.T, sec string, answer func(*session)) error {
	t.Helper()
	addr := newServer(t, answer)
	o := newOutbound(t, addr, sec)
	c, err := o.DialStream(context.Background(), tcpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	return err
}

func TestResponseHeaderMismatchFailsTheFlow(t *testing.T) {
	err := readAfterHandshake(t, "aes-128-gcm", func(s *session) {
		s.header(s.req.Check + 1)
		s.chunk([]byte("data"))
	})
	if !errors.Is(err, protocol.ErrResponseMismatch) || err.Error() != "vmess: response header does not match the request" {
		t.Fatalf("%v", err)
	}
}

func TestUpstreamFrameLargerThanTheBuffer(t *testing.T) {
	err := readAfterHandshake(t, "chacha20-poly1305", func(s *session) {
		s.header(s.req.Check)
		s.chunk(make([]byte, bufSize)) // with its length and tag, past the buffer
	})
	if !errors.Is(err, proxyconn.ErrUpstreamFrameTooLarge) || !strings.Contains(err.Error(), "upstream frame larger than the client runtime's buffer") {
		t.Fatalf("%v", err)
	}
	// A sealed chunk that just fits is read.
	err = readAfterHandshake(t, "aes-128-gcm", func(s *session) {
		s.header(s.req.Check)
		s.chunk(make([]byte, bufSize-protocol.ChunkOverhead)) // with the largest padding
		s.chunk(nil)
	})
	if err != nil {
		t.Fatalf("a chunk filling the buffer: %v", err)
	}
	// A datagram is held whole too.
	addr := newServer(t, func(s *session) {
		s.header(s.req.Check)
		s.chunk(make([]byte, bufSize))
	})
	l, err := newOutbound(t, addr, "none").DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, _, err := l.ReadPacket(make([]byte, 64<<10)); !errors.Is(err, proxyconn.ErrUpstreamFrameTooLarge) {
		t.Fatalf("datagram: %v", err)
	}
}

// A stream in clear chunks needs no chunk whole: sing-box's server sends a
// whole read of up to 64 KiB as one chunk.
func TestClearStreamChunksLargerThanTheBuffer(t *testing.T) {
	big := make([]byte, 0xFFFF)
	rand.Read(big)
	addr := newServer(t, func(s *session) {
		s.header(s.req.Check)
		s.chunk(big)
		s.chunk([]byte("and a small one"))
		s.chunk(nil)
	})
	o := newOutbound(t, addr, "none")
	c, err := o.DialStream(context.Background(), tcpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, append(big, "and a small one"...)) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
}

func TestUpstreamClosedDuringTheHandshake(t *testing.T) {
	err := readAfterHandshake(t, "aes-128-gcm", func(s *session) {})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "upstream closed during the handshake") {
		t.Fatalf("%v", err)
	}
	err = readAfterHandshake(t, "aes-128-gcm", func(s *session) {
		s.conn.Write(s.req.AppendResponseHeader(nil, s.req.Check)[:20])
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "upstream closed during the handshake") {
		t.Fatalf("partial header: %v", err)
	}
}

func TestUpstreamClosedInsideAFrame(t *testing.T) {
	for _, sec := range []string{"aes-128-gcm", "none"} {
		err := readAfterHandshake(t, sec, func(s *session) {
			s.header(s.req.Check)
			c := s.out.AppendChunk(nil, []byte("a chunk cut short"))
			s.conn.Write(c[:len(c)-3])
		})
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "upstream closed inside a frame") {
			t.Fatalf("%s: %v", sec, err)
		}
	}
}

// A server that closes between two chunks without the end chunk ends the
// stream cleanly.
func TestUpstreamClosedBetweenFrames(t *testing.T) {
	if err := readAfterHandshake(t, "aes-128-gcm", func(s *session) {
		s.header(s.req.Check)
		s.chunk([]byte("all of it"))
	}); err != nil {
		t.Fatalf("%v", err)
	}
}

func TestTamperedChunkFailsTheFlow(t *testing.T) {
	err := readAfterHandshake(t, "aes-128-gcm", func(s *session) {
		s.header(s.req.Check)
		c := s.out.AppendChunk(nil, []byte("genuine"))
		c[5] ^= 1
		s.conn.Write(c)
	})
	if !errors.Is(err, protocol.ErrChunkAuth) {
		t.Fatalf("%v", err)
	}
}

// A read deadline that expires inside a frame leaves the frame to the next
// Read.
func TestReadTimeoutInsideAFrameResumes(t *testing.T) {
	release := make(chan struct{})
	addr := newServer(t, func(s *session) {
		s.header(s.req.Check)
		c := s.out.AppendChunk(nil, []byte("patience"))
		s.conn.Write(c[:4])
		<-release
		s.conn.Write(c[4:])
		s.chunk(nil)
	})
	o := newOutbound(t, addr, "aes-128-gcm")
	c, err := o.DialStream(context.Background(), tcpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 100)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	close(release)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "patience" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestDialFailsWhenTheServerRefuses(t *testing.T) {
	o := newOutbound(t, proxytest.RefusedAddr(t), "auto")
	if _, err := o.DialStream(context.Background(), tcpFlow(echoDst)); err == nil {
		t.Fatal("DialStream succeeded with no server")
	}
	if _, err := o.DialPacket(context.Background(), udpFlow(echoDst)); err == nil {
		t.Fatal("DialPacket succeeded with no server")
	}
}

func TestDialHonoursItsContext(t *testing.T) {
	addr := newServer(t, func(s *session) {})
	o := newOutbound(t, addr, "auto")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.DialStream(ctx, tcpFlow(echoDst)); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func TestDialRefusesAnUnwritableDestination(t *testing.T) {
	o := newOutbound(t, "127.0.0.1:1", "auto")
	long := netx.DomainAddr(strings.Repeat("a", 256), 80)
	if _, err := o.DialStream(context.Background(), tcpFlow(long)); err == nil || !strings.Contains(err.Error(), "longer than 255") {
		t.Fatalf("%v", err)
	}
}

func TestNew(t *testing.T) {
	base := spec.Outbound{Tag: "v", Type: "vmess", Server: "127.0.0.1:10086", UUID: testUUIDText, Security: "auto", GlobalPadding: true, UDP: true}
	deps := proxytest.Deps(nil)
	for _, tc := range []struct {
		edit func(*spec.Outbound)
		want string
	}{
		{func(o *spec.Outbound) { o.PacketEncoding = "packetaddr" }, `vmess: unknown packet_encoding "packetaddr"`},
		{func(o *spec.Outbound) { o.UUID = "not-a-uuid" }, "not of the form"},
		{func(o *spec.Outbound) { o.Security = "aes-128-cfb" }, `unknown security "aes-128-cfb"`},
		{func(o *spec.Outbound) { o.Server = "nowhere" }, "bad address"},
	} {
		o := base
		tc.edit(&o)
		if _, err := New(o, deps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
	o, err := New(base, deps)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.ProbeTarget(); got.String() != "127.0.0.1:10086" {
		t.Fatalf("probe target %v", got)
	}
	if o.security != protocol.AutoSecurity() {
		t.Fatalf("auto resolved to %v", o.security)
	}
}

// Bytes a server would not send, arriving in pieces of every size, fail the
// flow or end it; they never panic, whether the reader keeps its grown
// buffer (a stream's) or gives it back when empty (an XUDP stream's).
func FuzzStreamRead(f *testing.F) {
	f.Add(uint8(0), uint8(1), []byte{})
	f.Add(uint8(1), uint8(3), []byte("\x00\x10aaaaaaaaaaaaaaaa"))
	f.Add(uint8(2), uint8(200), bytes.Repeat([]byte{0xff}, 70))
	f.Add(uint8(3), uint8(7), []byte("raw bytes"))
	f.Fuzz(func(t *testing.T, secIndex, step uint8, body []byte) {
		sec := []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone, protocol.SecurityZero}[secIndex%4]
		s, err := protocol.NewSession(protocol.Request{Command: protocol.CommandTCP, Security: sec, GlobalPadding: true, Dst: echoDst}, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		hdr, _ := s.AppendRequest(nil, protocol.NewID(testUUID), time.Now())
		resp := responseHeaderFor(t, hdr)
		wire := append(resp, body...)
		var script [][]byte
		for n := max(int(step), 1); len(wire) > 0; wire = wire[min(n, len(wire)):] {
			script = append(script, wire[:min(n, len(wire))])
		}
		c := newStreamConn(&bytesConn{script: script}, s)
		if secIndex&4 != 0 {
			c = newMuxConn(&bytesConn{script: script}, s) // its reader gives its pooled buffer back
		}
		buf := make([]byte, 1000)
		for range 100000 {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
		t.Fatal("reads never ended")
	})
}

// Chunks that arrived together are handed out by one Read, so a server's
// small chunks cost one write downstream per read of the upstream. A
// failure after them is kept for the next Read.
func TestOneReadReturnsEveryBufferedChunk(t *testing.T) {
	for _, sec := range []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone, protocol.SecurityZero} {
		s, req := allocSession(t, sec, protocol.CommandTCP)
		body := req.ResponseBody()
		wire := req.AppendResponseHeader(nil, req.Check)
		for _, p := range []string{"one ", "two ", "three"} {
			wire = body.AppendChunk(wire, []byte(p))
		}
		sealed := s.Framed() && sec != protocol.SecurityNone && sec != protocol.SecurityZero
		if sealed {
			bad := body.AppendChunk(nil, []byte("tampered"))
			bad[protocol.SizeFieldLen] ^= 1 // the sealed payload's first byte
			wire = append(wire, bad...)
		}
		c := newStreamConn(&bytesConn{script: [][]byte{wire}}, s)
		buf := make([]byte, 32<<10)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "one two three" {
			t.Fatalf("%v: first Read: %q, %v", sec, buf[:n], err)
		}
		if !sealed {
			continue
		}
		if _, err := c.Read(buf); !errors.Is(err, protocol.ErrChunkAuth) {
			t.Fatalf("%v: second Read: %v", sec, err)
		}
	}
}

// A flow's read buffer starts small and grows to bufSize once it moves more
// at a time; no staging buffer is held between writes.
func TestBuffersGrowWithTheFlow(t *testing.T) {
	addr := newServer(t, echo)
	c, err := newOutbound(t, addr, "aes-128-gcm").DialStream(context.Background(), tcpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.(*streamConn)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, tc := range []struct{ n, want int }{{100, startBuf}, {3000, startBuf}, {20000, bufSize}, {10, bufSize}} {
		p := make([]byte, tc.n)
		rand.Read(p)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, tc.n)
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("echo of %d bytes: %v", tc.n, err)
		}
		if len(s.rd.buf) != tc.want {
			t.Fatalf("after %d bytes: reading %d, want %d", tc.n, len(s.rd.buf), tc.want)
		}
	}
}
