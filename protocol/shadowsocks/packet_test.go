package shadowsocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPacketRoundTrip(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCipher(t, tc.method, tc.password)
			p, err := c.NewPacketClient()
			if err != nil {
				t.Fatal(err)
			}
			srv := &serverPackets{c: c, sessionID: 77}
			buf := make([]byte, 65535)
			id := uint64(0)
			for i, size := range []int{0, 1, 1400, 60000} {
				for _, to := range targets {
					payload := random(size)
					pkt, err := p.Seal(buf, to, payload)
					if err != nil {
						t.Fatal(err)
					}
					sid, gotTo, got, err := srv.openClient(pkt)
					if err != nil {
						t.Fatalf("server opening a packet of %d bytes: %v", size, err)
					}
					if gotTo != to || !bytes.Equal(got, payload) || sid != p.sessionID {
						t.Fatalf("server got %v (%d bytes, session %d), sent %v (%d bytes, session %d)", gotTo, len(got), sid, to, size, p.sessionID)
					}
					id++
					reply := srv.sealServer(p.sessionID, id, time.Now().Unix(), i, to, payload)
					from, back, err := p.Open(reply)
					if err != nil {
						t.Fatalf("opening the reply: %v", err)
					}
					if from != to || !bytes.Equal(back, payload) {
						t.Fatalf("reply from %v (%d bytes), want %v (%d bytes)", from, len(back), to, size)
					}
				}
			}
		})
	}
}

func TestPacketTooLarge(t *testing.T) {
	for _, tc := range cases() {
		c := mustCipher(t, tc.method, tc.password)
		p, _ := c.NewPacketClient()
		buf := make([]byte, 2000)
		if _, err := p.Seal(buf, targets[0], random(1990)); err == nil || err.Error() != "frame larger than the client runtime's buffer" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// serverTimes are the 2022 cases' clients with a server.
func packetPair(t *testing.T, method, password string) (*PacketClient, *serverPackets) {
	c := mustCipher(t, method, password)
	p, err := c.NewPacketClient()
	if err != nil {
		t.Fatal(err)
	}
	return p, &serverPackets{c: c, sessionID: 5}
}

func TestPacketReplayDropped(t *testing.T) {
	for _, method := range []struct{ m, pw string }{
		{"2022-blake3-aes-128-gcm", psk(16, 1)},
		{"2022-blake3-chacha20-poly1305", psk(32, 1)},
	} {
		p, srv := packetPair(t, method.m, method.pw)
		now := time.Now().Unix()
		first := srv.sealServer(p.sessionID, 1, now, 0, targets[1], []byte("one"))
		if _, _, err := p.Open(bytes.Clone(first)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Open(bytes.Clone(first)); !errors.Is(err, ErrReplay) {
			t.Fatalf("%s: replay: %v", method.m, err)
		}
		// Reordered packets inside the window pass, once.
		for _, id := range []uint64{1500, 2, 1000} {
			pkt := srv.sealServer(p.sessionID, id, now, 0, targets[1], []byte("x"))
			if _, _, err := p.Open(bytes.Clone(pkt)); err != nil {
				t.Fatalf("%s: packet %d: %v", method.m, id, err)
			}
			if _, _, err := p.Open(pkt); !errors.Is(err, ErrReplay) {
				t.Fatalf("%s: packet %d again: %v", method.m, id, err)
			}
		}
		// Too far behind the newest.
		if _, _, err := p.Open(srv.sealServer(p.sessionID, 2500, now, 0, targets[1], nil)); err != nil {
			t.Fatal(err)
		}
		old := srv.sealServer(p.sessionID, 2500-windowSize, now, 0, targets[1], []byte("x"))
		if _, _, err := p.Open(old); !errors.Is(err, ErrReplay) {
			t.Fatalf("%s: a packet behind the window: %v", method.m, err)
		}
	}
}

func TestPacketChecks(t *testing.T) {
	for _, method := range []struct{ m, pw string }{
		{"2022-blake3-aes-256-gcm", psk(32, 1) + ":" + psk(32, 2)},
		{"2022-blake3-chacha20-poly1305", psk(32, 1)},
	} {
		p, srv := packetPair(t, method.m, method.pw)
		now := time.Now().Unix()
		for _, tc := range []struct {
			name string
			pkt  []byte
			want string
		}{
			{"old timestamp", srv.sealServer(p.sessionID, 1, now-31, 0, targets[0], nil), "packet timestamp"},
			{"another client", srv.sealServer(p.sessionID+1, 2, now, 0, targets[0], nil), "another client session"},
			{"padding past the end", func() []byte {
				body := []byte{headerServer}
				body = binary.BigEndian.AppendUint64(body, uint64(now))
				body = binary.BigEndian.AppendUint64(body, p.sessionID)
				body = binary.BigEndian.AppendUint16(body, 40)
				return srv.sealBody(3, append(body, make([]byte, 39)...))
			}(), "padding of 40 bytes runs past the packet"},
			{"client type", func() []byte {
				body := []byte{headerClient}
				body = binary.BigEndian.AppendUint64(body, uint64(now))
				body = binary.BigEndian.AppendUint64(body, p.sessionID)
				body = binary.BigEndian.AppendUint16(body, 0)
				return srv.sealBody(3, append(body, 1, 1, 1, 1, 1, 0, 1))
			}(), "packet header type 0 (want 1)"},
			{"too short", srv.sealServer(p.sessionID, 3, now, 0, targets[0], nil)[:30], "too short"},
			{"tampered", func() []byte {
				b := srv.sealServer(p.sessionID, 4, now, 0, targets[0], []byte("payload"))
				b[len(b)-20] ^= 1
				return b
			}(), ErrAuth.Error()},
		} {
			_, _, err := p.Open(tc.pkt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s: %v, want %q", method.m, tc.name, err, tc.want)
			}
		}
		// None of them was accepted: their ids are still fresh.
		for id := uint64(1); id <= 4; id++ {
			if _, _, err := p.Open(srv.sealServer(p.sessionID, id, now, 0, targets[0], nil)); err != nil {
				t.Errorf("%s: packet %d after refusals: %v", method.m, id, err)
			}
		}
	}
}

func TestAEADPacketChecks(t *testing.T) {
	c := mustCipher(t, "aes-128-gcm", "pw")
	p, _ := c.NewPacketClient()
	srv := &serverPackets{c: c}
	pkt := srv.sealServer(0, 0, 0, 0, targets[0], []byte("data"))
	pkt[20] ^= 1
	if _, _, err := p.Open(pkt); !errors.Is(err, ErrAuth) {
		t.Fatalf("tampered: %v", err)
	}
	if _, _, err := p.Open(pkt[:16+15]); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("short: %v", err)
	}
	other, _ := mustCipher(t, "aes-128-gcm", "another").NewPacketClient()
	if _, _, err := other.Open(srv.sealServer(0, 0, 0, 0, targets[0], nil)); !errors.Is(err, ErrAuth) {
		t.Fatalf("another password: %v", err)
	}
}

// The server session may change once; a third session within a minute of
// the replaced one's last packet is refused, and accepted after.
func TestServerSessionChanges(t *testing.T) {
	p, srv := packetPair(t, "2022-blake3-aes-128-gcm", psk(16, 1))
	clock := time.Now()
	p.c.now = func() time.Time { return clock }
	send := func(session, id uint64) error {
		srv.sessionID = session
		_, _, err := p.Open(srv.sealServer(p.sessionID, id, clock.Unix(), 0, targets[0], []byte("x")))
		return err
	}
	if err := send(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := send(2, 0); err != nil {
		t.Fatalf("the first change: %v", err)
	}
	if err := send(1, 1); err != nil {
		t.Fatalf("a late packet of the replaced session: %v", err)
	}
	if err := send(3, 0); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("a second change at once: %v", err)
	}
	clock = clock.Add(sessionSwitchGap)
	if err := send(3, 0); err != nil {
		t.Fatalf("a change a minute later: %v", err)
	}
	if err := send(1, 2); err == nil {
		t.Fatal("the session replaced twice still accepted")
	}
}

func TestReplayWindow(t *testing.T) {
	var w replayWindow
	accept := func(id uint64) bool {
		if !w.fresh(id) {
			return false
		}
		w.add(id)
		return true
	}
	for _, step := range []struct {
		id   uint64
		want bool
	}{
		{0, true}, {0, false}, {1, true}, {64, true}, {63, true}, {63, false},
		{10000, true}, {10000 - windowSize, false}, {10000 - windowSize + 1, true},
		{9999, true}, {64, false}, {1 << 40, true}, {10000, false}, {1<<40 - 1, true},
	} {
		if got := accept(step.id); got != step.want {
			t.Fatalf("id %d: accepted %v, want %v", step.id, got, step.want)
		}
	}
}

func TestPacketAddressChecks(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{nil, "address missing"},
		{[]byte{9, 1, 2}, "unknown address type 0x09"},
		{[]byte{atypIPv4, 1, 2, 3}, "truncated"},
		{[]byte{atypDomain, 0, 0, 0}, "empty domain"},
		{[]byte{atypDomain, 3, 'a', ' ', 'b', 0, 1}, "holds byte 0x20"},
	} {
		if _, _, err := parseAddr(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%x: %v, want %q", tc.b, err, tc.want)
		}
	}
	a, n, err := parseAddr([]byte{atypDomain, 8, '1', '0', '.', '0', '.', '0', '.', '1', 0, 80, 0xff})
	if err != nil || n != 12 || a.IsName() || a.String() != "10.0.0.1:80" {
		t.Fatalf("an IP written as a name: %v %d %v", a, n, err)
	}
}
