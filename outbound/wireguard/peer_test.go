package wireguard

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/tun/netstack"
)

// Addresses inside the test tunnel.
var (
	peerV4   = netip.MustParseAddr("10.7.0.1")
	peerV6   = netip.MustParseAddr("fd00:7::1")
	clientV4 = netip.MustParsePrefix("10.7.0.2/32")
	clientV6 = netip.MustParsePrefix("fd00:7::2/128")
)

// Services of the test peer, on each of its tunnel addresses.
const (
	echoTCPPort = 7
	echoUDPPort = 9001 // answers "p0:" + payload
	echoUDPAlt  = 9002 // answers "p1:" + payload
)

// keyPair is a WireGuard key pair in base64.
type keyPair struct{ private, public string }

func newKeyPair(t testing.TB) keyPair {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{
		private: base64.StdEncoding.EncodeToString(k.Bytes()),
		public:  base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()),
	}
}

func newPSK(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func hexKey(t testing.TB, b64 string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// peerOptions configures a test peer.
type peerOptions struct {
	client   string // the client's public key
	psk      string // "" = none
	reserved []byte // required on every received message and written on every sent one
	mtu      int
	ipv6     bool // listen on [::1] instead of 127.0.0.1
}

// testPeer is a WireGuard server on a userspace stack: a second device, on
// wireguard-go's tun/netstack rather than the client's own stack, serving a
// TCP echo and two UDP echoes inside its tunnel, on a loopback UDP socket.
type testPeer struct {
	keys     keyPair
	addr     netip.AddrPort // its UDP socket
	received atomic.Int64   // messages accepted
	bad      atomic.Int64   // messages dropped for wrong reserved bytes

	dev     *device.Device
	mu      sync.Mutex  // guards closers
	closers []io.Closer // listeners and connections, closed first
	wg      sync.WaitGroup
}

func startPeer(t testing.TB, o peerOptions) *testPeer {
	t.Helper()
	if o.mtu == 0 {
		o.mtu = defaultMTU
	}
	p := &testPeer{keys: newKeyPair(t)}
	listenOn := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	if o.ipv6 {
		listenOn = &net.UDPAddr{IP: net.IPv6loopback}
	}
	sock, err := net.ListenUDP("udp", listenOn)
	if err != nil {
		t.Fatal(err)
	}
	p.addr = sock.LocalAddr().(*net.UDPAddr).AddrPort()
	tdev, tnet, err := netstack.CreateNetTUN([]netip.Addr{peerV4, peerV6}, nil, o.mtu)
	if err != nil {
		t.Fatal(err)
	}
	b := &peerBind{sock: sock, peer: p, reserved: o.reserved}
	p.dev = device.NewDevice(newOrderedTUN(tdev), b, device.NewLogger(device.LogLevelSilent, ""))
	cfg := "private_key=" + hexKey(t, p.keys.private) + "\npublic_key=" + hexKey(t, o.client) + "\n"
	if o.psk != "" {
		cfg += "preshared_key=" + hexKey(t, o.psk) + "\n"
	}
	cfg += "allowed_ip=" + clientV4.String() + "\nallowed_ip=" + clientV6.String() + "\n"
	if err := p.dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := p.dev.Up(); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []netip.Addr{peerV4, peerV6} {
		ln, err := tnet.ListenTCPAddrPort(netip.AddrPortFrom(ip, echoTCPPort))
		if err != nil {
			t.Fatal(err)
		}
		p.serveTCP(ln)
		for i, port := range []uint16{echoUDPPort, echoUDPAlt} {
			c, err := tnet.ListenUDPAddrPort(netip.AddrPortFrom(ip, port))
			if err != nil {
				t.Fatal(err)
			}
			p.serveUDP(c, fmt.Sprintf("p%d:", i))
		}
	}
	t.Cleanup(p.close)
	return p
}

// admit replaces the peer's client with the one of the public key client
// and the tunnel addresses local, with no preshared key.
func (p *testPeer) admit(t testing.TB, client string, local ...netip.Prefix) {
	t.Helper()
	cfg := "replace_peers=true\npublic_key=" + hexKey(t, client) + "\n"
	for _, l := range local {
		cfg += "allowed_ip=" + l.String() + "\n"
	}
	if err := p.dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
}

func (p *testPeer) serveTCP(ln net.Listener) {
	p.closers = append(p.closers, ln)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.closers = append(p.closers, c)
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
}

func (p *testPeer) serveUDP(c net.PacketConn, prefix string) {
	p.closers = append(p.closers, c)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		b := make([]byte, 65535)
		for {
			n, from, err := c.ReadFrom(b)
			if err != nil {
				return
			}
			c.WriteTo(append([]byte(prefix), b[:n]...), from)
		}
	}()
}

// close stops the services before the device, so nothing writes into the
// stack while it closes. Every test starts its peer before its client, so
// the client is closed first and sends nothing while the peer closes.
func (p *testPeer) close() {
	p.mu.Lock()
	for _, c := range p.closers {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.dev.Close()
}

// peerBind is the test peer's socket. It drops every message whose bytes
// 1..3 are not the expected reserved bytes, clears them, and writes its own
// into every message it sends, so both directions of the client's handling
// are checked.
type peerBind struct {
	peer     *testPeer
	reserved []byte

	mu   sync.Mutex // guards sock
	sock *net.UDPConn
}

type peerEndpoint struct{ netip.AddrPort }

func (e peerEndpoint) ClearSrc()           {}
func (e peerEndpoint) SrcToString() string { return "" }
func (e peerEndpoint) DstToString() string { return e.String() }
func (e peerEndpoint) DstIP() netip.Addr   { return e.Addr() }
func (e peerEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }
func (e peerEndpoint) DstToBytes() []byte  { b, _ := e.MarshalBinary(); return b }

func (b *peerBind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sock == nil {
		s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(b.peer.addr))
		if err != nil {
			return nil, 0, err
		}
		b.sock = s
	}
	sock := b.sock
	recv := func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		for {
			n, from, err := sock.ReadFromUDPAddrPort(bufs[0])
			if err != nil {
				return 0, net.ErrClosed
			}
			msg := bufs[0][:n]
			if n > 3 {
				want := []byte{0, 0, 0}
				if b.reserved != nil {
					want = b.reserved
				}
				if !bytes.Equal(msg[1:4], want) {
					b.peer.bad.Add(1)
					continue
				}
				msg[1], msg[2], msg[3] = 0, 0, 0
			}
			b.peer.received.Add(1)
			sizes[0], eps[0] = n, peerEndpoint{from}
			return 1, nil
		}
	}
	return []conn.ReceiveFunc{recv}, b.peer.addr.Port(), nil
}

// Close closes the socket; the next Open listens again on the same port.
func (b *peerBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sock != nil {
		b.sock.Close()
		b.sock = nil
	}
	return nil
}

func (b *peerBind) SetMark(uint32) error { return nil }
func (b *peerBind) BatchSize() int       { return 1 }

func (b *peerBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(peerEndpoint)
	if !ok {
		return conn.ErrWrongEndpointType
	}
	b.mu.Lock()
	sock := b.sock
	b.mu.Unlock()
	if sock == nil {
		return net.ErrClosed
	}
	for _, msg := range bufs {
		if b.reserved != nil && len(msg) > 3 {
			copy(msg[1:4], b.reserved)
		}
		if _, err := sock.WriteToUDPAddrPort(msg, e.AddrPort); err != nil {
			return err
		}
	}
	return nil
}

func (b *peerBind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	return peerEndpoint{ap}, err
}

// orderedTUN keeps a packet the peer's device hands to tun/netstack from
// racing the stack's Close: delivering a packet can make that stack answer
// at once on a channel its Close closes.
type orderedTUN struct {
	tun.Device
	mu     sync.RWMutex // Write holds it shared, Close exclusively
	closed bool
}

func newOrderedTUN(d tun.Device) *orderedTUN { return &orderedTUN{Device: d} }

func (o *orderedTUN) Write(bufs [][]byte, offset int) (int, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return 0, os.ErrClosed
	}
	return o.Device.Write(bufs, offset)
}

func (o *orderedTUN) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	return o.Device.Close()
}
