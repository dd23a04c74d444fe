package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

const (
	bulkBuf   = 64 << 10 // read/write size of the bulk streams
	reqSize   = 64       // request of the connection-rate exchange
	replySize = 256      // reply of the connection-rate exchange
)

// servers are the destinations the proxies connect to, all on one local
// address (127.0.0.1 unless -dest says otherwise). Each kind listens on its
// own port, so no command byte precedes the payload.
type servers struct {
	sink   netip.AddrPort // reads and discards; counts bytes into sunk
	source netip.AddrPort // writes without end
	reqrep netip.AddrPort // reads a reqSize request, writes a replySize reply, closes
	hold   netip.AddrPort // reads one byte, echoes it, then holds the connection until EOF

	sunk atomic.Int64 // bytes the sink has read, all time

	// live connections per server, to wait for one measurement's
	// connections to be gone before the next starts.
	live [4]atomic.Int64

	lns []net.Listener

	// clientTLS, with -tls: the bulk streams run TLS 1.3 end to end (the
	// sink and source are TLS servers), as an application's HTTPS
	// through the proxy; nil otherwise.
	clientTLS *tls.Config
}

const (
	srvSink = iota
	srvSource
	srvReqRep
	srvHold
)

// startServers starts every server on ip, each on a port of its own; with
// useTLS the sink and the source speak TLS 1.3 (a fresh self-signed
// certificate).
func startServers(ip netip.Addr, useTLS bool) (*servers, error) {
	s := &servers{}
	handlers := []func(net.Conn){s.serveSink, s.serveSource, s.serveReqRep, s.serveHold}
	if useTLS {
		server, client, err := tlsConfigs()
		if err != nil {
			return nil, err
		}
		s.clientTLS = client
		for _, i := range []int{srvSink, srvSource} {
			h := handlers[i]
			handlers[i] = func(c net.Conn) { h(tls.Server(c, server)) }
		}
	}
	addrs := []*netip.AddrPort{&s.sink, &s.source, &s.reqrep, &s.hold}
	for i, h := range handlers {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			s.close()
			return nil, err
		}
		s.lns = append(s.lns, ln)
		*addrs[i] = ln.Addr().(*net.TCPAddr).AddrPort()
		go s.accept(ln, &s.live[i], h)
	}
	return s, nil
}

func (s *servers) close() {
	for _, ln := range s.lns {
		ln.Close()
	}
}

func (s *servers) accept(ln net.Listener, live *atomic.Int64, h func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			if isClosed(err) {
				return
			}
			// Out of descriptors or similar: back off instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		live.Add(1)
		go func() {
			defer live.Add(-1)
			defer c.Close()
			h(c)
		}()
	}
}

// totalLive is the number of server-side connections still open.
func (s *servers) totalLive() int64 {
	var n int64
	for i := range s.live {
		n += s.live[i].Load()
	}
	return n
}

// waitDrained waits until every server-side connection has ended or the
// timeout passes, and reports how many remain.
func (s *servers) waitDrained(timeout time.Duration) int64 {
	end := time.Now().Add(timeout)
	for {
		n := s.totalLive()
		if n == 0 || time.Now().After(end) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *servers) serveSink(c net.Conn) {
	buf := make([]byte, bulkBuf)
	for {
		n, err := c.Read(buf)
		s.sunk.Add(int64(n))
		if err != nil {
			return
		}
	}
}

func (s *servers) serveSource(c net.Conn) {
	buf := make([]byte, bulkBuf)
	fill(buf)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

func (s *servers) serveReqRep(c net.Conn) {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var req [reqSize]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return
	}
	// Closing right after the reply (as an HTTP/1.0 server would) keeps
	// the teardown independent of whether and when a proxy forwards the
	// client's half-close; the request was read in full, so this is a FIN,
	// not a reset.
	c.Write(replyBytes[:])
}

func (s *servers) serveHold(c net.Conn) {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return
	}
	if _, err := c.Write(b[:]); err != nil {
		return
	}
	io.Copy(io.Discard, c) // held until the client closes
}

var replyBytes = func() (b [replySize]byte) {
	fill(b[:])
	return b
}()

// fill writes a non-constant pattern, so nothing on the path can shortcut
// runs of zeros.
func fill(b []byte) {
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// tlsConfigs are the bulk servers' TLS 1.3 configuration, with a fresh
// self-signed certificate, and the clients', which trusts it.
func tlsConfigs() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "socksbench"},
		DNSNames:     []string{"socksbench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	client = &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "socksbench", RootCAs: pool}
	return server, client, nil
}
