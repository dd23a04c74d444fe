package transport

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"switchyard/spec"
)

// The steady state of a flow allocates nothing: a Write and the Read of
// its answer, over ws and over gRPC, against servers that allocate nothing
// per message either. The one allocation left is x/net's: its frame parser
// makes a new frame of each WINDOW_UPDATE the server sends (the server
// here sends a pair per 32 KiB, as a Go server with its 64 KiB window
// does), hence half an allocation per 8 KiB round for gRPC.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	const size = 8 << 10
	payload := bytes.Repeat([]byte{0x5A}, size)

	t.Run("ws", func(t *testing.T) {
		answer := serverFrame(opBinary, payload)
		server := rawWSServer(t, func(c net.Conn, br *bufio.Reader) {
			in := make([]byte, maxFrameHeader+size)
			for {
				// One masked frame of size bytes in, one frame out.
				if _, err := io.ReadFull(br, in[:2+2+4+size]); err != nil {
					return
				}
				if _, err := c.Write(answer); err != nil {
					return
				}
			}
		})
		c, err := dial(t, spec.Outbound{Server: server.String(), Transport: spec.Transport{Type: "ws"}}, deps(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		checkAllocs(t, c, payload, 0)
	})

	t.Run("grpc", func(t *testing.T) {
		server := accept(t, h2Echo)
		raw, err := net.Dial("tcp4", server.String())
		if err != nil {
			t.Fatal(err)
		}
		hc := newH2Conn(raw, &grpcConfig{authority: "a", path: "/s/Tun"})
		if err := hc.handshake(); err != nil {
			t.Fatal(err)
		}
		go hc.readLoop()
		defer hc.shutdown(net.ErrClosed, true)
		s, err := hc.open()
		if err != nil {
			t.Fatal(err)
		}
		c := newGRPCConn(s, func() {})
		defer c.Close()
		checkAllocs(t, c, payload, 0.5)
	})
}

func checkAllocs(t *testing.T, c net.Conn, payload []byte, want float64) {
	t.Helper()
	buf := make([]byte, len(payload))
	round := func() {
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // fill the pools and windows
		round()
	}
	if avg := testing.AllocsPerRun(200, round); avg > want+0.05 {
		t.Fatalf("%.2f allocations per round, want %.2f", avg, want)
	}
	if !bytes.Equal(buf, payload) {
		t.Fatal("the answer differs")
	}
}

// h2Echo is a minimal HTTP/2 server that answers the one stream's DATA
// with the same bytes (so gRPC messages come back whole) and credits the
// client's bytes back per 32 KiB; it allocates nothing per frame.
func h2Echo(c net.Conn) {
	br := bufio.NewReader(c)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, br)
	fr.SetReuseFrames()
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	unacked := uint32(0)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hb.Bytes(), EndHeaders: true})
		case *http2.DataFrame:
			if n := uint32(len(f.Data())); n > 0 {
				fr.WriteData(f.StreamID, false, f.Data())
				if unacked += n; unacked >= 32<<10 {
					fr.WriteWindowUpdate(0, unacked)
					fr.WriteWindowUpdate(f.StreamID, unacked)
					unacked = 0
				}
			}
		}
	}
}
