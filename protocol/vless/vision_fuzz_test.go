package vless

import (
	"bytes"
	"testing"
)

// FuzzUnpadder feeds server bytes to the block decoder in pieces of every
// size. It may not panic, it returns no more content than it was fed, and
// once the padding ended it takes nothing more.
func FuzzUnpadder(f *testing.F) {
	seed := AppendBlock(nil, &visionUUID, []byte("hello"), CommandContinue, false)
	seed = AppendBlock(seed, nil, []byte("world"), CommandEnd, false)
	f.Add(seed, uint8(3))
	f.Add(append(visionUUID[:], 9, 0, 0, 0, 0), uint8(1))
	f.Add(append(visionUUID[:], 0, 0xff, 0xff, 0xff, 0xff), uint8(200))
	f.Add([]byte("not vision"), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		n := int(step) + 1
		u := NewUnpadder(visionUUID)
		var out []byte
		fed := 0
		for i := 0; i < len(b); i += n {
			piece := b[i:min(i+n, len(b))]
			var took int
			var err error
			out, took, err = u.Feed(out, piece)
			if took < 0 || took > len(piece) {
				t.Fatalf("took %d of %d", took, len(piece))
			}
			fed += took
			if err != nil {
				return
			}
			if ended, _ := u.Ended(); ended {
				if _, again, _ := u.Feed(nil, []byte{1}); again != 0 {
					t.Fatal("took bytes after the end")
				}
				break
			}
		}
		if len(out) > fed {
			t.Fatalf("%d bytes of content from %d fed", len(out), fed)
		}
	})
}

// FuzzRecordTracker and FuzzFilter look at arbitrary inner bytes: no
// panic, and a cut inside the piece it was found in.
func FuzzRecordTracker(f *testing.F) {
	f.Add([]byte{0x17, 3, 3, 0, 1, 0, 0x17, 3, 3, 0, 0}, uint8(2))
	f.Add([]byte{0x16, 3, 1, 0xff, 0xff}, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		n := int(step) + 1
		var r RecordTracker
		flt := NewFilter()
		for i := 0; i < len(b); i += n {
			piece := b[i:min(i+n, len(b))]
			if c := r.Feed(piece); c > len(piece) || c < -1 || c == 0 {
				t.Fatalf("cut %d in a piece of %d", c, len(piece))
			}
			flt.Look(piece)
			CompleteRecords(piece)
			for _, c := range SplitContent(piece, nil) {
				if len(c) >= ContentMax {
					t.Fatalf("piece of %d", len(c))
				}
			}
		}
		if bytes.Equal(b, nil) && flt.TLS {
			t.Fatal("TLS from nothing")
		}
	})
}
