package transport

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"

	"switchyard/netx"
)

// h2Script runs a shared gRPC connection whose server sends the frames
// write makes (after its SETTINGS) and then ends; it returns the first read
// error of each of n streams opened before.
func h2Script(t *testing.T, n int, write func(fr *http2.Framer)) []error {
	t.Helper()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	write(fr)
	c := newH2Conn(&scriptConn{r: bytes.NewReader(b.Bytes())}, &grpcConfig{authority: "a", path: "/s/Tun"})
	if err := c.handshake(); err != nil {
		t.Fatal(err)
	}
	var gs []*grpcConn
	for range n {
		s, err := c.open()
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, newGRPCConn(s, func() {}))
	}
	c.readLoop()
	var errs []error
	for _, g := range gs {
		_, err := g.Read(make([]byte, 64))
		errs = append(errs, err)
		g.Close()
	}
	return errs
}

// The shared connection's failure is one carrier episode for every
// stream on it; a GOAWAY is one for the streams it did not take; a stream
// reset is that stream's alone.
func TestH2FailuresCarryTheirProvenance(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(fr *http2.Framer)
		want  []netx.Fault
		same  bool // every stream reports one episode
	}{
		{"connection broke", func(*http2.Framer) {}, []netx.Fault{netx.FaultCarrier, netx.FaultCarrier}, true},
		{"goaway", func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) }, []netx.Fault{netx.FaultCarrier, netx.FaultCarrier}, true},
		{"stream reset", func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeInternal) }, []netx.Fault{netx.FaultStreamReset}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := h2Script(t, len(c.want), c.write)
			var eps []uint64
			for i, err := range errs {
				f, ep := netx.FaultOf(err)
				if f != c.want[i] {
					t.Fatalf("stream %d failed with %v (fault %v), want %v", i, err, f, c.want[i])
				}
				eps = append(eps, ep)
			}
			if c.same && (eps[0] == 0 || eps[0] != eps[1]) {
				t.Fatalf("the streams report episodes %v, want one", eps)
			}
			if !c.same && eps[0] != 0 {
				t.Fatalf("a stream's own failure has episode %d", eps[0])
			}
		})
	}
}

// A server byte stream that breaks the framing is the node's.
func TestFramingErrorsAreTheNodes(t *testing.T) {
	for _, err := range []error{errHunkCompressed, errHunkTruncated, errWSReserved, errWSInsideFrame} {
		if f, _ := netx.FaultOf(err); f != netx.FaultFraming {
			t.Errorf("%v: fault %v", err, f)
		}
	}
}
