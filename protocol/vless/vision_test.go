package vless

import (
	"bytes"
	"encoding/hex"
	"testing"

	"switchyard/netx"
)

var visionUUID = UUID{0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11}

// The flow rides in the addons as the protobuf field 1, as Xray writes it.
func TestRequestFlowAddons(t *testing.T) {
	b, err := AppendRequestFlow(nil, &visionUUID, FlowVision, CmdTCP, netx.DomainAddr("a.test", 443))
	if err != nil {
		t.Fatal(err)
	}
	want := "00" + hex.EncodeToString(visionUUID[:]) + "12" + "0a10" + hex.EncodeToString([]byte(FlowVision)) + "01" + "01bb" + "02" + "06" + hex.EncodeToString([]byte("a.test"))
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("request %s\nwant    %s", got, want)
	}
	plain, _ := AppendRequestFlow(nil, &visionUUID, "", CmdMux, netx.Addr{})
	if len(plain) != 19 || plain[17] != 0 {
		t.Fatalf("plain request %x", plain)
	}
}

// Blocks decode to their content whatever the cuts of the stream after its
// first buffer (which, as Xray's reader sees it, holds the UUID and a block
// header at least); the padding ends with the command that ends it, and
// what follows is not taken.
func TestBlocksRoundTrip(t *testing.T) {
	var stream []byte
	stream = AppendBlock(stream, &visionUUID, nil, CommandContinue, true)
	stream = AppendBlock(stream, nil, []byte("client hello"), CommandContinue, true)
	stream = AppendBlock(stream, nil, bytes.Repeat([]byte{7}, ContentMax), CommandContinue, false)
	stream = AppendBlock(stream, nil, []byte("app data"), CommandDirect, true)
	tail := []byte("raw inner records")
	stream = append(stream, tail...)
	want := append(append([]byte("client hello"), bytes.Repeat([]byte{7}, ContentMax)...), "app data"...)
	for _, step := range []int{1, 3, 21, 1000, len(stream)} {
		u := NewUnpadder(visionUUID)
		var got []byte
		rest := -1
		for i := 0; i < len(stream); {
			next := min(i+step, len(stream))
			if i == 0 {
				next = max(next, blockOverhead)
			}
			piece := stream[i:next]
			var took int
			var err error
			got, took, err = u.Feed(got, piece)
			if err != nil {
				t.Fatal(err)
			}
			if ended, cmd := u.Ended(); ended {
				if cmd != CommandDirect {
					t.Fatalf("ended with %d", cmd)
				}
				rest = i + took
				break
			}
			i = next
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d: content of %d bytes, want %d", step, len(got), len(want))
		}
		if rest < 0 || !bytes.Equal(stream[rest:], tail) {
			t.Fatalf("step %d: the rest starts at %d", step, rest)
		}
	}
}

// A short block that hides a header is padded long; no block passes the
// 8 KiB a reader's buffer holds.
func TestBlockSizes(t *testing.T) {
	for range 50 {
		b := AppendBlock(nil, &visionUUID, nil, CommandContinue, true)
		if n := len(b) - blockOverhead; n < longBase-0 || n >= longBase+longRand {
			t.Fatalf("padding-only block of %d bytes", len(b))
		}
		big := AppendBlock(nil, &visionUUID, make([]byte, ContentMax), CommandEnd, true)
		if len(big) != BlockMax {
			t.Fatalf("full block of %d bytes", len(big))
		}
	}
}

// A stream that does not start with the user's UUID is not Vision's: it
// passes unchanged.
func TestUnpadderWithoutUUID(t *testing.T) {
	u := NewUnpadder(visionUUID)
	got, took, err := u.Feed(nil, []byte("plain bytes from elsewhere"))
	if err != nil || took != 26 || string(got) != "plain bytes from elsewhere" {
		t.Fatalf("%q %d %v", got, took, err)
	}
}

func TestCompleteRecordsAndSplit(t *testing.T) {
	rec := func(n int) []byte { return append([]byte{0x17, 3, 3, byte(n >> 8), byte(n)}, make([]byte, n)...) }
	if !CompleteRecords(append(rec(10), rec(300)...)) {
		t.Fatal("two whole records")
	}
	if CompleteRecords(rec(10)[:8]) || CompleteRecords(append([]byte{0x14, 3, 3, 0, 1, 1}, rec(5)...)) || CompleteRecords(nil) {
		t.Fatal("a cut record, a change cipher spec or nothing is complete")
	}
	stream := append(rec(5000), rec(5000)...)
	cuts := SplitContent(stream, nil)
	if len(cuts) != 2 || len(cuts[0]) != 5005 || !bytes.HasPrefix(cuts[1], []byte{0x17, 3, 3}) {
		t.Fatalf("cut at %d", len(cuts[0]))
	}
	for _, c := range SplitContent(make([]byte, 100000), nil) {
		if len(c) >= ContentMax {
			t.Fatalf("piece of %d bytes", len(c))
		}
	}
}

// The filter finds a TLS 1.3 server hello with a suite Vision copies
// directly, and stops looking.
func TestFilterTLS13(t *testing.T) {
	f := NewFilter()
	f.Look([]byte{0x16, 0x03, 0x01, 0x00, 0x10, 0x01, 0, 0, 0})
	if !f.TLS || f.TLS12 {
		t.Fatal("the client hello")
	}
	hello := make([]byte, 100)
	copy(hello, []byte{0x16, 0x03, 0x03, 0x00, 95, 0x02})
	hello[43] = 0 // no session id
	hello[44], hello[45] = 0x13, 0x01
	copy(hello[80:], tls13Versions)
	f.Look(hello)
	if !f.TLS12 || !f.Direct || f.Watching() {
		t.Fatalf("%+v", f)
	}
	g := NewFilter()
	hello[44], hello[45] = 0x13, 0x05 // AES-128-CCM-8: not direct
	g.Look(hello)
	if g.Direct || !g.TLS12 {
		t.Fatalf("%+v", g)
	}
	h := NewFilter()
	for range 8 {
		h.Look([]byte("not tls at all"))
	}
	if h.Watching() || h.TLS {
		t.Fatalf("%+v", h)
	}
}

// The tracker cuts after the inner client's second application data
// record, wherever the writes cut the records.
func TestRecordTracker(t *testing.T) {
	var stream []byte
	stream = append(stream, 0x16, 3, 1, 0, 3, 1, 2, 3) // client hello
	stream = append(stream, 0x14, 3, 3, 0, 1, 1)       // change cipher spec
	stream = append(stream, 0x17, 3, 3, 0, 2, 9, 9)    // finished
	end := len(stream) + 5 + 4
	stream = append(stream, 0x17, 3, 3, 0, 4, 1, 2, 3, 4) // application data
	stream = append(stream, 0x17, 3, 3, 0, 9)             // and the start of another
	for _, step := range []int{1, 4, 7, len(stream)} {
		var r RecordTracker
		cut := -1
		for i := 0; i < len(stream) && cut < 0; i += step {
			if c := r.Feed(stream[i:min(i+step, len(stream))]); c >= 0 {
				cut = i + c
			}
		}
		if cut != end {
			t.Fatalf("step %d: cut at %d, want %d", step, cut, end)
		}
	}
	var r RecordTracker
	if r.Feed([]byte("GET / HTTP/1.1\r\n")) != -1 || !r.lost {
		t.Fatal("not TLS")
	}
}
