package fakeip

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzUnmarshalBinary: saved bytes of any content are restored or refused,
// never a panic, and the table stays bounded and consistent.
func FuzzUnmarshalBinary(f *testing.F) {
	seed := mustNew(f, Config{IPv4: v4Range, IPv6: v6Range})
	for i := range 5 {
		seed.Lookup(fmt.Sprintf("n%d.test", i))
	}
	b, _ := seed.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 1, 1, 'a', 1, 198, 18, 0, 9, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Size: 64})
		if err := tb.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrBadBinary) {
				t.Fatal(err)
			}
			return
		}
		if tb.Len() > 64 {
			t.Fatalf("len %d", tb.Len())
		}
		checkConsistent(t, tb)
		tb.Lookup("new.test")
		checkConsistent(t, tb)
	})
}
