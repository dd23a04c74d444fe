package netlab

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/test/socksclient"
)

// Target is a minimal HTTP server inside the namespace: every request on a
// connection gets "200 OK" with the body "ok" and the connection closes.
// It counts the connections it accepted, so a caller can tell that a flow
// reached it on a connection of its own.
type Target struct {
	Addr     string // host:port on the namespace's end of the link
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

// targetIdle bounds how long the target waits for a request.
const targetIdle = 10 * time.Second

// response is what Target answers every request with.
const response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

// StartTarget starts a Target in p's namespace. Close stops it and waits
// for its goroutines.
func (p *Path) StartTarget() (*Target, error) {
	ln, err := p.Listen()
	if err != nil {
		return nil, err
	}
	t := &Target{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Accepted is how many connections the target has accepted.
func (t *Target) Accepted() int64 { return t.accepted.Load() }

func (t *Target) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		t.accepted.Add(1)
		go t.serve(c)
	}
}

func (t *Target) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(targetIdle))
	r := textproto.NewReader(bufio.NewReader(c))
	if _, err := r.ReadLine(); err != nil {
		return
	}
	if _, err := r.ReadMIMEHeader(); err != nil {
		return
	}
	io.WriteString(c, response)
}

// Close stops the target and ends its connections.
func (t *Target) Close() {
	t.mu.Lock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.ln.Close()
	t.wg.Wait()
}

// TTFB opens a new flow through the SOCKS5 proxy at proxy: a new TCP
// connection to the proxy, a CONNECT to target, an HTTP request written as
// soon as the proxy answers. It returns the time from before the
// connection to the proxy until the first byte of the response, and reads
// the rest of the response to check it, all within timeout.
func TTFB(proxy, target string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := socksclient.DialWithin(proxy, target, "", "", timeout)
	if err != nil {
		return 0, fmt.Errorf("CONNECT %s through %s: %w", target, proxy, err)
	}
	defer c.Close()
	c.SetDeadline(start.Add(timeout))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", target); err != nil {
		return 0, fmt.Errorf("writing the request: %w", err)
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return 0, fmt.Errorf("no response through %s: %w", proxy, err)
	}
	ttfb := time.Since(start)
	// The whole response, not waiting for the end of the stream: how soon
	// the target's close travels back is not what is measured.
	resp := make([]byte, len(response))
	resp[0] = first[0]
	if _, err := io.ReadFull(c, resp[1:]); err != nil {
		return 0, fmt.Errorf("reading the response: %w", err)
	}
	if string(resp) != response {
		return 0, fmt.Errorf("unexpected response through %s: %q", proxy, resp)
	}
	return ttfb, nil
}
