package store

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, c := range [][2]string{{"proxy", "tcp"}, {"", ""}, {"a\x00b", "udp"}, {"日本", "tcp"}} {
		g, n, err := decodeChoiceKey(choiceKey(c[0], c[1]))
		if err != nil || g != c[0] || n != c[1] {
			t.Errorf("choice key %q: %q %q %v", c, g, n, err)
		}
	}
	for _, m := range []string{"", "hk", "\x01\x02"} {
		if got, err := decodeChoice(encodeChoice(m)); err != nil || got != m {
			t.Errorf("choice %q: %q %v", m, got, err)
		}
	}
	for _, d := range []Delay{
		{},
		{RTT: 42 * time.Millisecond, At: time.Unix(1_800_000_000, 999_999_999)},
		{RTT: -time.Second, At: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{RTT: 1<<63 - 1, At: time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC)},
	} {
		got, err := decodeDelay(encodeDelay(d))
		if err != nil || got.RTT != d.RTT || !got.At.Equal(d.At) {
			t.Errorf("delay %+v: %+v %v", d, got, err)
		}
	}
	// The encoding is the documented one.
	if got, want := encodeDelay(Delay{RTT: 1, At: time.Unix(1, 2)}), []byte{1, 2, 2, 2}; !bytes.Equal(got, want) {
		t.Errorf("encodeDelay = %x, want %x", got, want)
	}
	if got, want := choiceKey("ab", "tcp"), []byte("\x02ab\x03tcp"); !bytes.Equal(got, want) {
		t.Errorf("choiceKey = %q, want %q", got, want)
	}
}

// FuzzDecode checks that no bytes in a state file panic the decoders, and
// that what decodes encodes back to a value that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(choiceKey("proxy", "tcp"), encodeChoice("hk"))
	f.Add(delayKey("hk"), encodeDelay(Delay{RTT: time.Second, At: time.Unix(1e9, 5)}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte{1, 0x80})
	f.Add(fakeIPsKey, encodeFakeIPs([]FakeIPMapping{{Name: "example.com", V4: netip.MustParseAddr("198.18.0.1"),
		V6: netip.MustParseAddr("fc00::1"), LastUsed: time.Unix(1e9, 5)}, {Name: "x"}}))
	f.Add(fakeIPsKey, []byte{1, 2, 0, 16, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if g, n, err := decodeChoiceKey(key); err == nil && !bytes.Equal(choiceKey(g, n), key) {
			t.Fatalf("choice key %x decodes to %q %q", key, g, n)
		}
		if node, err := decodeDelayKey(key); err == nil && !bytes.Equal(delayKey(node), key) {
			t.Fatalf("delay key %x decodes to %q", key, node)
		}
		if m, err := decodeChoice(value); err == nil && !bytes.Equal(encodeChoice(m), value) {
			t.Fatalf("choice %x decodes to %q", value, m)
		}
		if ms, err := decodeFakeIPs(value); err == nil {
			again, err := decodeFakeIPs(encodeFakeIPs(ms))
			if err != nil || len(again) != len(ms) {
				t.Fatalf("fake IPs %x decode to %+v, then %+v %v", value, ms, again, err)
			}
			for i, m := range ms {
				if a := again[i]; a.Name != m.Name || a.V4 != m.V4 || a.V6 != m.V6 || !a.LastUsed.Equal(m.LastUsed) {
					t.Fatalf("fake IPs %x: mapping %d decodes to %+v, then %+v", value, i, m, a)
				}
			}
		}
		if d, err := decodeDelay(value); err == nil {
			again, err := decodeDelay(encodeDelay(d))
			if err != nil || again.RTT != d.RTT || !again.At.Equal(d.At) {
				t.Fatalf("delay %x decodes to %+v, then %+v %v", value, d, again, err)
			}
		}
	})
}
