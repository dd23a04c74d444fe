package mux

import (
	"bytes"
	"testing"

	"switchyard/netx"
)

// FuzzParseFrame feeds server bytes to the frame decoder the way a client
// reads them: sized by FrameLen, then parsed. Neither may panic, a parsed
// frame re-encodes to a frame that parses the same, and a frame is never
// sized past what its length fields say.
func FuzzParseFrame(f *testing.F) {
	seeds := []Frame{
		{Status: StatusNew, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("example.com", 53), GlobalID: [8]byte{9}, Data: []byte("q")},
		{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("1.1.1.1", 53), Data: []byte("answer")},
		{Status: StatusKeep, Option: OptionData, Data: []byte("stream")},
		{Status: StatusEnd, Option: OptionError},
		{Status: StatusKeepAlive, Option: OptionData, Data: []byte{}},
	}
	for _, s := range seeds {
		b, err := AppendFrame(nil, &s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 4, 0, 0, 2, 1, 0xff, 0xff})
	f.Add([]byte{0, 0x0e, 0, 0, 2, 1, 2, 0, 53, 1, 8, 8, 8, 8, 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Parser
		for len(b) > 0 {
			n, err := FrameLen(b)
			if err != nil || n > len(b) {
				return
			}
			if n < 6 || n > 2+MaxMetaLen+2+0xffff {
				t.Fatalf("frame sized %d", n)
			}
			fr, err := p.Parse(b[:n])
			if err == nil {
				again, err := AppendFrame(nil, &fr)
				if err == nil {
					fr2, err := p.Parse(again)
					if err != nil || fr2.Status != fr.Status || fr2.Target != fr.Target || !bytes.Equal(fr2.Data, fr.Data) {
						t.Fatalf("re-encoded frame: %+v, %v; was %+v", fr2, err, fr)
					}
				}
			}
			b = b[n:]
		}
	})
}
