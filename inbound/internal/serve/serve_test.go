package serve

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"switchyard/route/sniff/snifftest"

	"go.uber.org/goleak"

	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Close closes the listener and the live connections, and returns once the
// handlers have returned.
func TestConnsClose(t *testing.T) {
	s := NewConns(nil)
	ln := listen(t)
	served := make(chan error, 1)
	handling := make(chan struct{})
	returned := make(chan struct{}, 1)
	go func() {
		served <- s.Serve(ln, func(c net.Conn) {
			close(handling)
			io.Copy(io.Discard, c) // until the connection is closed
			<-s.Context().Done()
			returned <- struct{}{}
		})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-handling

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("Close returned before the handler")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client read %v, want EOF", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestConnsAfterStop(t *testing.T) {
	s := NewConns(nil)
	s.Stop()
	ln := listen(t)
	if err := s.Serve(ln, func(net.Conn) { t.Error("handled after Stop") }); err != nil {
		t.Fatalf("Serve after Stop = %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the listener was left open: %v", err)
	}
	a, b := net.Pipe()
	defer b.Close()
	if s.Add(a) {
		t.Fatal("Add after Stop")
	}
	if _, err := a.Write([]byte{1}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the refused conn was left open: %v", err)
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	s := NewConns(nil)
	defer s.Close()
	ln := listen(t)
	ln.Close() // closed by someone else: not a Stop
	if err := s.Serve(ln, func(net.Conn) {}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve = %v, want the listener's error", err)
	}
}

func TestReadFirst(t *testing.T) {
	hello := snifftest.ClientHello(t, "first.example")
	pair := func(t *testing.T) (client, server net.Conn) {
		ln := listen(t)
		defer ln.Close()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return client, server
	}

	t.Run("split ClientHello", func(t *testing.T) {
		client, server := pair(t)
		client.Write(hello[:30])
		go func() { time.Sleep(50 * time.Millisecond); client.Write(hello[30:]) }()
		f, err := ReadFirst(server, hello[:0], time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release()
		if f.Protocol != "tls" || f.Domain != "first.example" || len(f.Bytes()) != len(hello) {
			t.Fatalf("got %q %q, %d bytes", f.Protocol, f.Domain, len(f.Bytes()))
		}
	})
	t.Run("head given", func(t *testing.T) {
		client, server := pair(t)
		client.Write([]byte("Host: h.example\r\n\r\n"))
		f, err := ReadFirst(server, []byte("GET / HTTP/1.1\r\n"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release()
		if f.Protocol != "http" || f.Domain != "h.example" {
			t.Fatalf("got %q %q", f.Protocol, f.Domain)
		}
	})
	t.Run("silent client", func(t *testing.T) {
		client, server := pair(t)
		start := time.Now()
		f, err := ReadFirst(server, nil, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release()
		if len(f.Bytes()) != 0 || f.Protocol != "" || time.Since(start) > time.Second {
			t.Fatalf("got %d bytes, %q after %v", len(f.Bytes()), f.Protocol, time.Since(start))
		}
		// The deadline is cleared: a later read gets what comes.
		client.Write([]byte("late"))
		if n, err := server.Read(make([]byte, 8)); err != nil || n != 4 {
			t.Fatalf("read after ReadFirst = %d, %v", n, err)
		}
	})
	t.Run("client closes", func(t *testing.T) {
		client, server := pair(t)
		client.Write([]byte("GET / HT"))
		client.Close()
		f, err := ReadFirst(server, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release()
		if string(f.Bytes()) != "GET / HT" {
			t.Fatalf("got %q", f.Bytes())
		}
	})
}

func TestPrefixReader(t *testing.T) {
	r := &PrefixReader{Head: []byte("ab"), R: strings.NewReader("cd")}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "abcd" || len(r.Head) != 0 {
		t.Fatalf("read %q, %v; head left %q", b, err, r.Head)
	}
}

func TestAuthenticate(t *testing.T) {
	users := []spec.User{{Username: "a", Password: "1"}, {Username: "b", Password: "2"}}
	for _, tc := range []struct {
		user, pass string
		ok         bool
	}{{"a", "1", true}, {"b", "2", true}, {"a", "2", false}, {"", "", false}, {"c", "1", false}} {
		if got := Authenticate(users, tc.user, tc.pass); got != tc.ok {
			t.Errorf("Authenticate(%q, %q) = %v", tc.user, tc.pass, got)
		}
	}
	if Authenticate(nil, "", "") {
		t.Error("no users accepted an empty login")
	}
}
