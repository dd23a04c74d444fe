package pressure

import (
	"testing"
	"time"

	"switchyard/netx"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// busy is c after an interval that moved payload bytes and got ACKs.
func busy(c Counters, payload uint64) Counters {
	c.Acked += payload
	c.Payload += payload
	c.Sent += payload
	c.Transmissions += payload / 1400
	return c
}

func TestWindowIntervalEdges(t *testing.T) {
	base := Counters{Carrier: 1, RTT: 20 * time.Millisecond, Transmissions: 100}
	for _, tc := range []struct {
		name string
		span time.Duration
		next func(Counters) Counters
		want Verdict
	}{
		{"shorter than 1 s accumulates", time.Second - time.Nanosecond, func(c Counters) Counters { return busy(c, 64<<10) }, Accumulating},
		{"exactly 1 s", time.Second, func(c Counters) Counters { return busy(c, 64<<10) }, Active},
		{"exactly 10 s", 10 * time.Second, func(c Counters) Counters { return busy(c, 64<<10) }, Active},
		{"longer than 10 s is unknown", 10*time.Second + time.Nanosecond, func(c Counters) Counters { return busy(c, 64<<10) }, Unknown},
		{"idle is unknown", 5 * time.Second, func(c Counters) Counters { return c }, Unknown},
		{"payload without fresh ACK progress is unknown", 5 * time.Second, func(c Counters) Counters {
			c.Payload += 64 << 10
			c.Sent += 64 << 10
			return c
		}, Unknown},
		{"4 KiB less a byte is unknown", 5 * time.Second, func(c Counters) Counters { return busy(c, 4<<10-1) }, Unknown},
		{"4 KiB is active", 5 * time.Second, func(c Counters) Counters { return busy(c, 4<<10) }, Active},
		{"31 datagrams are unknown", 5 * time.Second, func(c Counters) Counters {
			c = busy(c, 1000)
			c.Datagrams += 31
			return c
		}, Unknown},
		{"32 datagrams are active", 5 * time.Second, func(c Counters) Counters {
			c = busy(c, 1000)
			c.Datagrams += 32
			return c
		}, Active},
		{"another carrier starts over", 5 * time.Second, func(c Counters) Counters {
			c = busy(c, 64<<10)
			c.Carrier++
			return c
		}, Unknown},
		{"a regressed counter starts over", 5 * time.Second, func(c Counters) Counters {
			c = busy(c, 64<<10)
			c.Transmissions = 5
			return c
		}, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Window
			if _, v := w.Next(t0, base); v != Unknown {
				t.Fatalf("the first reading: %v, want unknown", v)
			}
			if _, v := w.Next(t0.Add(tc.span), tc.next(base)); v != tc.want {
				t.Fatalf("got %v, want %v", v, tc.want)
			}
		})
	}
}

// An interval shorter than 1 s goes on: the next reading closes it over
// the whole span, counting every byte since the base.
func TestWindowAccumulatesShortIntervals(t *testing.T) {
	var w Window
	c := Counters{Carrier: 7, Family: netx.V6, RTT: 30 * time.Millisecond}
	w.Next(t0, c)
	c = busy(c, 3<<10)
	if _, v := w.Next(t0.Add(600*time.Millisecond), c); v != Accumulating {
		t.Fatalf("at 600 ms: %v", v)
	}
	c = busy(c, 3<<10)
	s, v := w.Next(t0.Add(1200*time.Millisecond), c)
	if v != Active {
		t.Fatalf("at 1.2 s: %v", v)
	}
	if s.Payload != 6<<10 || !s.Start.Equal(t0) || s.End.Sub(s.Start) != 1200*time.Millisecond || s.Family != netx.V6 {
		t.Fatalf("sample %+v", s)
	}
}

// QUIC's lost counters fall back when a packet declared lost arrives: the
// delta is zero, not a wrapped huge number, and the carrier goes on.
func TestWindowLostCountersFallBack(t *testing.T) {
	var w Window
	c := Counters{Carrier: 1, RTT: time.Millisecond, Lost: 10, LostBytes: 10000}
	w.Next(t0, c)
	c = busy(c, 64<<10)
	c.Lost, c.LostBytes = 8, 8000
	s, v := w.Next(t0.Add(2*time.Second), c)
	if v != Active || s.Lost != 0 || s.LostBytes != 0 {
		t.Fatalf("%v %+v", v, s)
	}
}
