package relay_test

import (
	"io"
	"net"
	"testing"

	"switchyard/relay"
)

const benchBytes = 64 << 20

// benchPipe moves 64 MiB client → server through the relay per iteration.
func benchPipe(b *testing.B, wrap func(*net.TCPConn) net.Conn, want relay.Path) {
	chunk := make([]byte, 256<<10)
	b.SetBytes(benchBytes)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		client, inbound := tcpPair(b)
		upstream, server := tcpPair(b)
		b.StartTimer()

		done := relayed(wrap(inbound), wrap(upstream), 0)
		drained := make(chan int64, 1)
		go func() {
			n, _ := io.Copy(io.Discard, server)
			drained <- n
		}()
		for sent := 0; sent < benchBytes; sent += len(chunk) {
			if _, err := client.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		client.CloseWrite()
		if n := <-drained; n != benchBytes {
			b.Fatalf("the server got %d bytes", n)
		}
		server.CloseWrite()
		if res := <-done; res.PathAToB != want {
			b.Fatalf("path %v, want %v", res.PathAToB, want)
		}
	}
}

func BenchmarkPipeSplice(b *testing.B) {
	benchPipe(b, func(c *net.TCPConn) net.Conn { return c }, relay.PathSplice)
}

func BenchmarkPipeCopy(b *testing.B) {
	benchPipe(b, func(c *net.TCPConn) net.Conn { return plainConn{c} }, relay.PathCopy)
}
