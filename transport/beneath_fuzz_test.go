package transport

import (
	"bytes"
	"io"
	"testing"
)

// chunks reads b in pieces of step bytes.
type chunks struct {
	b    []byte
	step int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// FuzzRecordConn reads server bytes, records or not, through the
// record-bounded reader in pieces of every size: no panic, no read past a
// record's end as its header tells it, and every byte comes out once, in
// order, from the reads or from what Beneath hands over.
func FuzzRecordConn(f *testing.F) {
	f.Add([]byte{0x17, 3, 3, 0, 2, 'h', 'i', 0x17, 3, 3, 0, 0, 'r', 'a', 'w'}, uint8(3), uint16(7))
	f.Add([]byte{0x16, 3, 3, 0xff, 0xff, 1, 2}, uint8(0), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, step uint8, readSize uint16) {
		rc := &recordConn{src: &chunks{b: b, step: int(step) + 1}}
		p := make([]byte, int(readSize)%(recordBuf+10)+1)
		var got []byte
		left := 0 // bytes of the current record, from the headers in b
		for {
			n, err := rc.Read(p)
			if n > 0 {
				start := len(got)
				got = append(got, p[:n]...)
				for i := start; i < len(got); {
					if left == 0 {
						if len(got)-i < recordHeaderLen {
							if i != start {
								t.Fatalf("a read of %d crossed into a record it had no whole header of", n)
							}
							break
						}
						left = recordHeaderLen + (int(got[i+3])<<8 | int(got[i+4]))
						if i != start {
							t.Fatalf("a read of %d crossed a record's end", n)
						}
					}
					m := min(left, len(got)-i)
					left -= m
					i += m
				}
			}
			if err != nil {
				break
			}
		}
		_, rest := rc.beneath()
		if !bytes.Equal(append(got, rest...), b) {
			t.Fatalf("read %d and %d left of %d bytes, not the same", len(got), len(rest), len(b))
		}
	})
}
