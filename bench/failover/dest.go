package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// dest is the local HTTP server every router probes (GET or HEAD
// /generate_204 answers 204 after probeDelay) and every client flow asks
// (/who answers with the source address the connection came from). Each
// upstream Xray sends from its own loopback address (sendThrough), so the
// source address names the upstream that carried a request.
type dest struct {
	ln         net.Listener
	srv        *http.Server
	probeDelay time.Duration

	mu     sync.Mutex
	probes []probe
}

type probe struct {
	from string // source IP
	at   time.Time
}

func startDest(probeDelay time.Duration) (*dest, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &dest{ln: ln, probeDelay: probeDelay}
	mux := http.NewServeMux()
	mux.HandleFunc("/generate_204", func(w http.ResponseWriter, r *http.Request) {
		if d.probeDelay > 0 {
			time.Sleep(d.probeDelay)
		}
		w.WriteHeader(http.StatusNoContent)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		d.mu.Lock()
		d.probes = append(d.probes, probe{from: sourceIP(r.RemoteAddr), at: time.Now()})
		d.mu.Unlock()
	})
	mux.HandleFunc("/who", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, sourceIP(r.RemoteAddr))
	})
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(ln)
	return d, nil
}

func (d *dest) addr() string { return d.ln.Addr().String() }

func (d *dest) close() { d.srv.Close() }

// probedSince reports the first probe answered to source IP from at or
// after t.
func (d *dest) probedSince(from string, t time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.probes {
		if p.from == from && !p.at.Before(t) {
			return p.at, true
		}
	}
	return time.Time{}, false
}

func sourceIP(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	return ap.Addr().Unmap().String()
}

// flow is one client flow: a SOCKS5 CONNECT through the router to the
// destination and one HTTP/1.1 GET /who on it (Connection: close). It
// returns the source address the destination saw.
func flow(router string, dst netip.AddrPort, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", router, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := socksConnect(c, dst); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "GET /who HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", dst); err != nil {
		return "", fmt.Errorf("request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", fmt.Errorf("response: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("response body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("response: status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), nil
}

// socksConnect runs the client side of a SOCKS5 CONNECT to an IPv4
// destination without authentication and reads the whole reply.
func socksConnect(c net.Conn, dst netip.AddrPort) error {
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		return fmt.Errorf("socks greeting: %w", err)
	}
	var b [4 + 255 + 2]byte
	if _, err := io.ReadFull(c, b[:2]); err != nil {
		return fmt.Errorf("socks method reply: %w", err)
	}
	if b[0] != 5 || b[1] != 0 {
		return fmt.Errorf("socks method reply: version %d method %d", b[0], b[1])
	}
	a := dst.Addr().As4()
	req := []byte{5, 1, 0, 1, a[0], a[1], a[2], a[3], byte(dst.Port() >> 8), byte(dst.Port())}
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("socks request: %w", err)
	}
	if _, err := io.ReadFull(c, b[:4]); err != nil {
		return fmt.Errorf("socks reply: %w", err)
	}
	if b[0] != 5 {
		return fmt.Errorf("socks reply: version %d", b[0])
	}
	if b[1] != 0 {
		return fmt.Errorf("socks reply: code %d", b[1])
	}
	var rest int
	switch b[3] {
	case 1:
		rest = 4 + 2
	case 4:
		rest = 16 + 2
	case 3:
		if _, err := io.ReadFull(c, b[:1]); err != nil {
			return fmt.Errorf("socks reply: %w", err)
		}
		rest = int(b[0]) + 2
	default:
		return fmt.Errorf("socks reply: address type %d", b[3])
	}
	if _, err := io.ReadFull(c, b[:rest]); err != nil {
		return fmt.Errorf("socks reply: %w", err)
	}
	return nil
}
