package tun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/tun"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"switchyard/inbound"
	"switchyard/internal/netstack"
	"switchyard/netx"
)

// Inbound is one running TUN inbound: its device, its stack, the
// goroutines between them and the flows they started.
type Inbound struct {
	cfg Config
	dev tun.Device
	// raw is the device's file when an offloading device is read and
	// written here (rawread_linux.go), bypassing the device's own Read and
	// Write; nil otherwise. Its writes go through rawOut: raw's raw writes
	// (deviceWriter), or a test's stand-in.
	raw    *os.File
	rawOut io.Writer
	// poller reads raw and the associations' direct sockets on one
	// goroutine (netx.Poller); nil where there is none: raw then has a
	// reader goroutine, and every sub-link too.
	poller *netx.Poller
	// segment: the kernel takes UDP segmentation offload on raw's writes
	// (replies.go); cleared if a write says otherwise.
	segment atomic.Bool
	stack   *netstack.Stack
	conn    inbound.Connector
	log     *slog.Logger
	udp     *associations
	dns     chan struct{} // slots of hijacked queries in flight
	icmp    chan struct{} // slots of echo relays in flight
	undo    func() error  // removes what auto_route installed; nil without it
	// unblock removes strict_route's rules, after the device is closed;
	// nil without it.
	unblock func() error

	ctx    context.Context // cancelled by Close: ends every flow
	cancel context.CancelFunc

	// mu guards closed and the Adds of wg, so that no goroutine is begun
	// once Close waits for them.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // the pumps, the flows, the association readers

	closeOnce sync.Once
	closeErr  error
}

// run runs an inbound over dev, which it owns from now on (Close closes
// it, and so does a failure here).
func run(cfg Config, dev tun.Device, conn inbound.Connector, log *slog.Logger) (*Inbound, error) {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := netstack.New(netstack.Options{MTU: cfg.MTU, Transparent: true, TCPBuffer: cfg.TCPBuffer, TCPBufferStart: tcpBufferStart, TimeWait: timeWait})
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("tun %s: the network stack: %w", cfg.Tag, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &Inbound{
		cfg: cfg, dev: dev, stack: st, conn: conn, log: log,
		dns:  make(chan struct{}, maxDNSInFlight),
		icmp: make(chan struct{}, maxEchoInFlight),
		ctx:  ctx, cancel: cancel,
	}
	in.udp = newAssociations(in)
	if f, ok := rawFile(dev); ok {
		in.raw, in.rawOut = f, deviceWriter(f)
		in.segment.Store(segmentationOffload(f))
	}
	fwd := tcp.NewForwarder(st.Stack(), 0, cfg.MaxHandshakes, in.handleTCP)
	st.Stack().SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	st.Stack().SetTransportProtocolHandler(udp.ProtocolNumber, in.handleUDP)
	if in.raw != nil {
		if p, err := netx.NewPoller(); err != nil {
			log.Debug("tun: no poller: the device and each association's sockets have reader goroutines", "error", err)
		} else {
			in.poller = p // before the device's first turn, which opens associations
			if err := in.pollRaw(p, in.raw); err != nil {
				in.poller = nil
				p.Close()
				log.Debug("tun: the poller cannot watch the device: it has a reader goroutine", "error", err)
			}
		}
	}
	if in.poller == nil {
		in.wg.Add(1)
		go in.readDevice()
	}
	in.wg.Add(3)
	go in.writeDevice()
	go in.drainEvents()
	go in.udp.sweep()
	return in, nil
}

// begin counts one more goroutine of the inbound; false once it closes.
func (in *Inbound) begin() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.wg.Add(1)
	return true
}

// readDevice hands every packet the device reads to the stack, an ICMP
// echo request (icmp.go) and a plain UDP datagram (fastudp.go) excepted.
func (in *Inbound) readDevice() {
	defer in.wg.Done()
	if in.raw != nil {
		in.readRaw(in.raw)
		return
	}
	batch := max(in.dev.BatchSize(), 1)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, packetOffset+in.cfg.MTU)
	}
	sizes := make([]int, batch)
	ps := make([][]byte, 0, batch)
	for {
		n, err := in.dev.Read(bufs, sizes, packetOffset)
		ps = ps[:0]
		for i := range n {
			p := bufs[i][packetOffset : packetOffset+sizes[i]]
			if !in.echo(p) && !in.takePlain(p, false) {
				ps = append(ps, p)
			}
		}
		// A batch holds the segments an offloading device split from the
		// kernel's large ones: the stack takes them coalesced again.
		in.stack.InjectBatch(ps)
		if err != nil {
			if errors.Is(err, tun.ErrTooManySegments) {
				continue
			}
			if !errors.Is(err, os.ErrClosed) && in.ctx.Err() == nil {
				in.log.Error("tun device read failed: the inbound stops", "error", err)
				in.cancel()
			}
			return
		}
	}
}

// writeDevice writes what the stack emits to the device, in batches of
// what is queued (up to writeBatch): an offloading device coalesces the
// segments of one TCP flow in a batch into one write to the kernel. Each
// buffer has room for a coalesced packet.
func (in *Inbound) writeDevice() {
	defer in.wg.Done()
	batch := 1
	if in.dev.BatchSize() > 1 {
		batch = writeBatch
	}
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, packetOffset+in.cfg.MTU, packetOffset+max(in.cfg.MTU, 65535))
	}
	sizes := make([]int, batch)
	out := make([][]byte, batch)
	for {
		n, err := in.stack.ReadPackets(bufs, sizes, packetOffset)
		if err != nil {
			return
		}
		for i := range n {
			out[i] = bufs[i][:packetOffset+sizes[i]]
		}
		if _, err := in.dev.Write(out[:n], packetOffset); err != nil && in.ctx.Err() == nil {
			in.log.Debug("tun device write failed", "error", err)
		}
	}
}

// writePacket writes one packet (after packetOffset bytes of headroom) to
// the device: an offloading device's file takes it after a virtio-net
// header of no offload, in one write of its own, not through the device's
// Write, whose coalescing has nothing to do for one packet.
func (in *Inbound) writePacket(b []byte) {
	var err error
	if in.rawOut != nil {
		h := b[packetOffset-virtioHdrLen:]
		clear(h[:virtioHdrLen])
		_, err = in.rawOut.Write(h)
	} else {
		_, err = in.dev.Write([][]byte{b}, packetOffset)
	}
	if err != nil && in.ctx.Err() == nil {
		in.log.Debug("tun device write failed", "error", err)
	}
}

// drainEvents reads the device's events, which its own goroutines block
// on, until the device closes them.
func (in *Inbound) drainEvents() {
	defer in.wg.Done()
	for range in.dev.Events() {
	}
}

// Tag is the inbound's tag.
func (in *Inbound) Tag() string { return in.cfg.Tag }

// Associations is how many UDP associations are open.
func (in *Inbound) Associations() int { return in.udp.len() }

// Close ends every flow and association, removes what auto_route
// installed, closes the device and waits for every goroutine of the
// inbound; strict_route's rules are removed last. It is idempotent.
func (in *Inbound) Close() error { return in.close(true) }

// Handover closes the inbound as Close does but leaves what auto_route
// installed (the device's routes go with the device) for a successor at
// the same table and priorities, which replaces it: with strict_route
// nothing passes around the device while it is recreated, and a
// successor already running keeps its entries.
func (in *Inbound) Handover() error { return in.close(false) }

func (in *Inbound) close(remove bool) error {
	in.closeOnce.Do(func() {
		in.mu.Lock()
		in.closed = true
		in.mu.Unlock()
		in.cancel()
		var errs []error
		if in.undo != nil && remove {
			errs = append(errs, in.undo())
		}
		in.udp.close()
		in.stack.Close()
		errs = append(errs, in.dev.Close())
		if in.poller != nil {
			in.poller.Close()
		}
		in.wg.Wait()
		if in.unblock != nil && remove {
			errs = append(errs, in.unblock())
		}
		in.closeErr = errors.Join(errs...)
	})
	return in.closeErr
}
