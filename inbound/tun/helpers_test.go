package tun

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/internal/netstack"
	"switchyard/netx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	appV4 = netip.MustParseAddr("172.19.0.1")
	appV6 = netip.MustParseAddr("fdfe:dcba:9876::1")
)

// lab is an inbound over an in-memory device, and the application's side
// of that device: a second userspace stack holding the addresses the
// kernel would hold, whose packets are what the device reads.
type lab struct {
	in   *Inbound
	app  *netstack.Stack
	dev  *tuntest.ChannelTUN
	conn *fakeConnector
	done chan struct{}
	wg   sync.WaitGroup
}

func newLab(t *testing.T, cfg Config, conn *fakeConnector) *lab {
	t.Helper()
	if cfg.Tag == "" {
		cfg.Tag = "tun-in"
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	l := &lab{dev: tuntest.NewChannelTUN(), conn: conn, done: make(chan struct{})}
	app, err := netstack.New(netstack.Options{Local: []netip.Addr{appV4, appV6}, MTU: cfg.MTU})
	if err != nil {
		t.Fatal(err)
	}
	l.app = app
	in, err := run(cfg, l.dev.TUN(), conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.in = in
	l.wg.Add(2)
	go func() { // the application's packets into the device
		defer l.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, err := app.ReadPacket(buf)
			if err != nil {
				return
			}
			select {
			case l.dev.Outbound <- append([]byte(nil), buf[:n]...):
			case <-l.done:
				return
			}
		}
	}()
	go func() { // the device's packets to the application
		defer l.wg.Done()
		for {
			select {
			case p, ok := <-l.dev.Inbound:
				if !ok {
					return
				}
				app.InjectPacket(p)
			case <-l.done:
				return
			}
		}
	}()
	t.Cleanup(l.close)
	return l
}

func (l *lab) close() {
	close(l.done)
	l.in.Close()
	l.app.Close()
	l.wg.Wait()
}

// fakeConnector dials every TCP flow to target (or fails with err when the
// destination is in refuse) and answers UDP with echo links.
type fakeConnector struct {
	target string
	refuse map[netip.AddrPort]bool
	// reply, when set, is what an echo link answers a packet to to with:
	// the payload and the peers it comes from.
	reply func(p []byte, to netx.Addr) []netx.Addr

	mu    sync.Mutex
	flows []netx.Flow
	links []*echoLink
}

var errRefused = errors.New("blocked by rule")

func (c *fakeConnector) ConnectStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	c.mu.Lock()
	c.flows = append(c.flows, f)
	c.mu.Unlock()
	if ap, _ := f.Dst.AddrPort(); c.refuse[ap] {
		return nil, errRefused
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", c.target)
}

func (c *fakeConnector) OpenAssociation(f netx.Flow) netx.PacketLink {
	l := &echoLink{flow: f, reply: c.reply, recv: make(chan datagram, 64), done: make(chan struct{})}
	c.mu.Lock()
	c.flows = append(c.flows, f)
	c.links = append(c.links, l)
	c.mu.Unlock()
	return l
}

func (c *fakeConnector) Flows() []netx.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]netx.Flow(nil), c.flows...)
}

func (c *fakeConnector) Links() []*echoLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*echoLink(nil), c.links...)
}

type datagram struct {
	p    []byte
	from netx.Addr
}

// echoLink answers every packet from its destination (or from the peers
// reply names), as a UDP echo server at each address would.
type echoLink struct {
	flow  netx.Flow
	reply func(p []byte, to netx.Addr) []netx.Addr
	recv  chan datagram
	once  sync.Once
	done  chan struct{}

	mu       sync.Mutex
	sent     []netx.Addr
	payloads []string   // what was sent, in order
	runs     [][]string // what was sent in one go (WritePackets)
}

func (l *echoLink) WritePacket(p []byte, to netx.Addr) error {
	l.mu.Lock()
	l.sent = append(l.sent, to)
	l.payloads = append(l.payloads, string(p))
	l.mu.Unlock()
	froms := []netx.Addr{to}
	if l.reply != nil {
		froms = l.reply(p, to)
	}
	for _, from := range froms {
		select {
		case l.recv <- datagram{append([]byte(nil), p...), from}:
		case <-l.done:
			return net.ErrClosed
		default:
		}
	}
	return nil
}

// WritePackets records the run and sends each of ps (netx.PacketBatchWriter).
func (l *echoLink) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	run := make([]string, len(ps))
	for i, p := range ps {
		run[i] = string(p)
	}
	l.mu.Lock()
	l.runs = append(l.runs, run)
	l.mu.Unlock()
	for i, p := range ps {
		if err := l.WritePacket(p, to); err != nil {
			return i, err
		}
	}
	return len(ps), nil
}

// Runs returns what was sent in one go, run by run.
func (l *echoLink) Runs() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]string(nil), l.runs...)
}

// Payloads returns what was sent, in order.
func (l *echoLink) Payloads() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.payloads...)
}

func (l *echoLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case d := <-l.recv:
		return copy(p, d.p), d.from, nil
	case <-l.done:
		return 0, netx.Addr{}, net.ErrClosed
	}
}

func (l *echoLink) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *echoLink) Sent() []netx.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]netx.Addr(nil), l.sent...)
}

func (l *echoLink) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// echoServer is a TCP server on loopback that writes back what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, ok := inboundtest.TCPEcho(t, "127.0.0.1:0")
	if !ok {
		t.Fatal("cannot listen on 127.0.0.1")
	}
	return ln.Addr().String()
}

func ctx5s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
