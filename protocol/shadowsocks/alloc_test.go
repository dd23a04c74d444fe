package shadowsocks

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// The steady state of a flow allocates nothing: sealing the upload, reading
// the download, and 2022 datagrams both ways. (A SIP004 datagram derives a
// subkey from its own salt, which allocates by design of that format.)
func TestSteadyStateAllocations(t *testing.T) {
	for _, tc := range cases() {
		c := mustCipher(t, tc.method, tc.password)
		_, up, resp, _ := c.Request(nil, targets[0])
		stage := make([]byte, 0, c.m.BufSize())
		chunk := random(32 * 1024)
		if n := testing.AllocsPerRun(100, func() { up.Seal(stage, chunk) }); n != 0 {
			t.Errorf("%s: sealing allocates %.1f times", tc.name, n)
		}

		down := response(c, resp.reqSalt[:c.m.KeyLen], random(2000*100), time.Now().Unix(), 100)
		r := resp.NewReader(bytes.NewReader(down), make([]byte, c.m.BufSize()))
		p := make([]byte, 100)
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { io.ReadFull(r, p) }); n != 0 {
			t.Errorf("%s: reading allocates %.1f times", tc.name, n)
		}

		if !c.m.Is2022 {
			continue
		}
		pc, _ := c.NewPacketClient()
		buf := make([]byte, 65535)
		payload := random(1200)
		if n := testing.AllocsPerRun(100, func() { pc.Seal(buf, targets[1], payload) }); n != 0 {
			t.Errorf("%s: sealing a datagram allocates %.1f times", tc.name, n)
		}
		srv := &serverPackets{c: c, sessionID: 3}
		var pkts [][]byte
		for id := range 102 {
			pkts = append(pkts, srv.sealServer(pc.sessionID, uint64(id), time.Now().Unix(), 0, targets[1], payload))
		}
		if _, _, err := pc.Open(pkts[0]); err != nil {
			t.Fatal(err)
		}
		i := 1
		if n := testing.AllocsPerRun(100, func() { pc.Open(pkts[i]); i++ }); n != 0 {
			t.Errorf("%s: opening a datagram allocates %.1f times", tc.name, n)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	for _, tc := range cases()[:6] {
		b.Run(tc.name, func(b *testing.B) {
			c := mustCipher(b, tc.method, tc.password)
			_, up, _, _ := c.Request(nil, targets[0])
			stage := make([]byte, 0, c.m.BufSize())
			chunk := random(16 * 1024)
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				for p := chunk; len(p) > 0; {
					_, n := up.Seal(stage, p)
					p = p[n:]
				}
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, tc := range cases()[:6] {
		b.Run(tc.name, func(b *testing.B) {
			c := mustCipher(b, tc.method, tc.password)
			_, _, resp, _ := c.Request(nil, targets[0])
			down := response(c, resp.reqSalt[:c.m.KeyLen], random(4<<20), time.Now().Unix(), c.m.maxPayload())
			p := make([]byte, 32*1024)
			buf := make([]byte, c.m.BufSize())
			b.SetBytes(4 << 20)
			for b.Loop() {
				r := resp.NewReader(bytes.NewReader(down), buf)
				for {
					if _, err := r.Read(p); err != nil {
						break
					}
				}
			}
		})
	}
}

func BenchmarkSealPacket(b *testing.B) {
	for _, tc := range cases()[:6] {
		b.Run(tc.name, func(b *testing.B) {
			c := mustCipher(b, tc.method, tc.password)
			pc, _ := c.NewPacketClient()
			buf := make([]byte, 65535)
			payload := random(1200)
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				pc.Seal(buf, targets[1], payload)
			}
		})
	}
}
