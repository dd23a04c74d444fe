package http

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/spec"
)

// FuzzRequestHead feeds arbitrary bytes to the proxy as a client's request
// head (with and without credentials required): the server answers or closes
// the connection, never panics, and returns once the client is gone.
func FuzzRequestHead(f *testing.F) {
	for _, seed := range []string{
		"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
		"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
		"CONNECT [::1]:1 HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n",
		"POST http://a.test/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive, x\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET http://a.test HTTP/1.0\r\nContent-Length: -1\r\n\r\n",
		"\x00\xff\r\n\r\n",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, head []byte, auth bool) {
		conn := inboundtest.NewConnector(t)
		conn.Err = errors.New("no upstream in the fuzzer")
		cfg := Config{Tag: "fuzz"}
		if auth {
			cfg.Users = []spec.User{{Username: "u", Password: "p"}}
		}
		srv := New(cfg, conn, nil)
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeConn(server, nil)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(head)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the server did not return after the client left")
		}
		srv.Close()
	})
}
