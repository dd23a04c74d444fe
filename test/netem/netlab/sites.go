package netlab

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"switchyard/test/socksclient"
)

// Sites are minimal HTTP servers on one address, one port each, started in
// the calling goroutine's network namespace. Each answers a request on a
// connection of its own and closes it with "200 OK" and the body "ok",
// except /generate_204 (a health probe URL), answered "204 No Content" on
// a connection kept open for the next request. Every server records, per request path, the source address
// the request came from: with each proxy server reaching the sites from an
// address of its own, that names the server that carried a flow, from the
// servers' side.
type Sites struct {
	Addrs []string // host:port of each site, in order

	lns  []net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[string]netip.Addr // request path -> source address
	conn map[net.Conn]struct{}
	done bool
}

// siteIdle bounds how long a site waits for a request.
const siteIdle = 10 * time.Second

const (
	siteOK        = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
	siteNoContent = "HTTP/1.1 204 No Content\r\n\r\n"
	// ProbePath is the path the sites answer with 204.
	ProbePath = "/generate_204"
)

// StartSites starts n sites on addr. Close stops them and waits for their
// goroutines.
func StartSites(addr netip.Addr, n int) (*Sites, error) {
	s := &Sites{seen: map[string]netip.Addr{}, conn: map[net.Conn]struct{}{}}
	for range n {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		if err != nil {
			s.Close()
			return nil, err
		}
		s.lns = append(s.lns, ln)
		s.Addrs = append(s.Addrs, ln.Addr().String())
	}
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	return s, nil
}

// Source is the source address the request for path came from, if one
// came.
func (s *Sites) Source(path string) (netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.seen[path]
	return a, ok
}

func (s *Sites) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conn[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Sites) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conn, c)
		s.mu.Unlock()
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(siteIdle))
	r := textproto.NewReader(bufio.NewReader(c))
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		if _, err := r.ReadMIMEHeader(); err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return
		}
		path := f[1]
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			s.mu.Lock()
			s.seen[path] = ap.Addr().Unmap()
			s.mu.Unlock()
		}
		if path != ProbePath {
			io.WriteString(c, siteOK)
			return
		}
		// A probe's connection stays open: a health probe sends its
		// warm-up request and the measured one on it.
		if _, err := io.WriteString(c, siteNoContent); err != nil {
			return
		}
	}
}

// Close stops the sites and ends their connections.
func (s *Sites) Close() {
	s.mu.Lock()
	s.done = true
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	for _, ln := range s.lns {
		ln.Close()
	}
	s.wg.Wait()
}

// Fetched is one GET through a SOCKS5 proxy.
type Fetched struct {
	// Local is the client's end of its connection to the proxy (the
	// proxy's flow table names it as the flow's source).
	Local netip.AddrPort
	// Connect is how long the connection to the proxy and its CONNECT
	// took; FirstByte the time from the request's write to the first byte
	// of the response. Their sum is the flow's time to the first byte.
	Connect, FirstByte time.Duration
}

// TTFB is the flow's time to the first byte of the response.
func (f Fetched) TTFB() time.Duration { return f.Connect + f.FirstByte }

// Fetch opens a new flow through the SOCKS5 proxy at proxy: a new TCP
// connection to the proxy, a CONNECT to site, then (after between, called
// with the flow's local address once the proxy has answered, when not nil)
// a GET of path, reading and checking the whole response, all within
// timeout. The time between takes is not in the figures.
func Fetch(proxy, site, path string, timeout time.Duration, between func(local netip.AddrPort)) (Fetched, error) {
	var f Fetched
	start := time.Now()
	c, err := socksclient.DialWithin(proxy, site, "", "", timeout)
	if err != nil {
		return f, fmt.Errorf("CONNECT %s through %s: %w", site, proxy, err)
	}
	defer c.Close()
	f.Connect = time.Since(start)
	c.SetDeadline(start.Add(timeout))
	if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
		f.Local = ap
	}
	if between != nil {
		between(f.Local)
	}
	sent := time.Now()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, site); err != nil {
		return f, fmt.Errorf("writing the request: %w", err)
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return f, fmt.Errorf("no response byte %v after the request: %w", time.Since(sent).Round(10*time.Microsecond), err)
	}
	f.FirstByte = time.Since(sent)
	resp := make([]byte, len(siteOK))
	resp[0] = first[0]
	if _, err := io.ReadFull(c, resp[1:]); err != nil {
		return f, fmt.Errorf("reading the response: %w", err)
	}
	if string(resp) != siteOK {
		return f, fmt.Errorf("unexpected response: %q", resp)
	}
	return f, nil
}
