package vlessecho

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

// vlessRequest builds a VLESS TCP request header for addr (a type byte and
// its bytes) followed by payload.
func vlessRequest(addr []byte, payload string) []byte {
	b := []byte{0}
	b = append(b, 0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11)
	b = append(b, 0, 1) // no addons, TCP
	b = binary.BigEndian.AppendUint16(b, 7)
	b = append(b, addr...)
	return append(b, payload...)
}

func TestSkipVLESSRequest(t *testing.T) {
	for _, addr := range [][]byte{
		{1, 127, 0, 0, 1},
		append([]byte{2, 9}, "echo.test"...),
		append([]byte{3}, make([]byte, 16)...),
	} {
		rest, err := skipVLESSRequest(vlessRequest(addr, "ping"))
		if err != nil || string(rest) != "ping" {
			t.Fatalf("address %v: %q %v", addr, rest, err)
		}
	}
	req := vlessRequest([]byte{1, 127, 0, 0, 1}, "")
	for n := range len(req) {
		if _, err := skipVLESSRequest(req[:n]); err == nil {
			t.Fatalf("a header cut at %d was taken", n)
		}
	}
	bad := bytes.Clone(req)
	bad[3] ^= 1 // another UUID
	if _, err := skipVLESSRequest(bad); err == nil {
		t.Fatal("another UUID was taken")
	}
}

func TestHunkRoundTrip(t *testing.T) {
	for _, data := range []string{"", "x", string(make([]byte, 300))} {
		got, err := readHunk(bufio.NewReader(bytes.NewReader(hunk([]byte(data)))))
		if err != nil || string(got) != data {
			t.Fatalf("%d bytes: %d back, %v", len(data), len(got), err)
		}
	}
}

// The echo server parses what a router sends it: neither parser panics,
// and what readHunk accepts lies within the message.
func FuzzEchoParsers(f *testing.F) {
	f.Add(hunk(vlessRequest([]byte{1, 127, 0, 0, 1}, "ping")))
	f.Add([]byte{0, 0, 0, 0, 3, 0x0a, 5, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if data, err := readHunk(bufio.NewReader(bytes.NewReader(b))); err == nil {
			if len(data) > len(b) {
				t.Fatalf("%d bytes of data from %d", len(data), len(b))
			}
			skipVLESSRequest(data)
		}
		skipVLESSRequest(b)
	})
}

// The server echoes a VLESS stream's payload and Close ends its serve loop
// (the package's leak check sees the rest).
func TestStartAndClose(t *testing.T) {
	e, err := Start(4)
	if err != nil {
		t.Fatal(err)
	}
	if e.Addr().Port == 0 {
		t.Fatal("no port")
	}
	e.Close()
}
