package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"switchyard/netx"
)

// HTTP/2 flow control toward this client: each stream may have streamWindow
// bytes unread, credited back every quarter; the connection window is large
// enough never to be the bound (a stalled stream holds only its own).
const (
	streamWindow   = 1 << 20
	streamUpdateAt = streamWindow / 4
	connWindow     = 1 << 30
	connUpdateAt   = 4 << 20
	// initialWindow is RFC 9113's window before any SETTINGS.
	initialWindow = 65535
	// maxStreamID is the last client stream identifier.
	maxStreamID = 1<<31 - 1
	// idleTimeout closes a shared connection that carried no stream for
	// this long.
	idleTimeout = 60 * time.Second
)

var (
	errH2Idle        = errors.New("grpc: the shared connection was idle and closed")
	errH2Unusable    = errors.New("grpc: the shared connection takes no new stream")
	errH2GoingAway   = errors.New("grpc: the server is going away and did not take this stream")
	errH2FlowControl = errors.New("grpc: the server sent more than the flow-control window")
)

// h2Conn is one HTTP/2 connection to the server carrying many gRPC streams.
// One goroutine (readLoop) reads frames and hands them to their streams; it
// ends when the connection closes.
//
// Lock order: wmu before mu before any stream's mu. wmu serialises frame
// writes (and the HPACK encoder state); it is the only lock held across a
// write to the socket, and nothing waits for wmu while holding mu.
//
// Frames go through a buffer: a writer that sees another waiting for wmu
// leaves the flush to it, so frames of concurrent streams share TLS
// records and syscalls; the last writer in flushes.
type h2Conn struct {
	raw      net.Conn
	fr       *http2.Framer
	cfg      *grpcConfig
	loopDone chan struct{}

	wmu     sync.Mutex
	writers atomic.Int32 // goroutines holding or waiting for wmu
	bw      *bufio.Writer
	henc    *hpack.Encoder
	hbuf    bytes.Buffer

	mu         sync.Mutex
	streams    map[uint32]*h2Stream
	nextID     uint32
	sendWindow int64 // connection window toward the server
	recvLeft   int64 // connection window we granted and the server has not used
	unacked    int64 // consumed bytes not yet credited to the connection
	peerWindow int64 // the server's initial stream window
	maxFrame   int
	maxStreams uint32
	goAway     bool
	err        error // set once: the connection is over
	idle       *time.Timer
}

func newH2Conn(raw net.Conn, cfg *grpcConfig) *h2Conn {
	c := &h2Conn{
		raw:        raw,
		cfg:        cfg,
		loopDone:   make(chan struct{}),
		streams:    make(map[uint32]*h2Stream),
		nextID:     1,
		sendWindow: initialWindow,
		recvLeft:   connWindow,
		peerWindow: initialWindow,
		maxFrame:   16384,
		maxStreams: 1<<32 - 1,
	}
	c.bw = bufio.NewWriterSize(raw, 32<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(raw, 32<<10))
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16384)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 64 << 10
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// handshake sends the client preface and settings and reads the server's
// settings, so a server that does not speak HTTP/2 fails the dial.
func (c *h2Conn) handshake() error {
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.fr.MaxHeaderListSize},
	)
	if err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, connWindow-initialWindow); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return fmt.Errorf("grpc: reading the server's HTTP/2 settings: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("grpc: the server opened HTTP/2 with a %v frame, not its settings", f.Header().Type)
	}
	return c.onSettings(sf)
}

// usable reports whether a new stream may open here; mu is held.
func (c *h2Conn) usable() bool {
	return c.err == nil && !c.goAway && uint32(len(c.streams)) < c.maxStreams && c.nextID < maxStreamID
}

// open starts a stream: HEADERS with the gRPC request, written before open
// returns (flushed then, or by the writer queued behind, which flushes
// before it lets go). errH2Unusable means the pool should take another
// connection.
func (c *h2Conn) open() (*h2Stream, error) {
	c.lockWrite()
	c.mu.Lock()
	if !c.usable() {
		c.mu.Unlock()
		c.unlockWrite(nil)
		return nil, errH2Unusable
	}
	id := c.nextID
	c.nextID += 2
	s := newH2Stream(c, id, c.peerWindow)
	c.streams[id] = s
	if c.idle != nil {
		c.idle.Stop()
	}
	maxFrame := c.maxFrame
	c.mu.Unlock()

	c.hbuf.Reset()
	for _, f := range [...][2]string{
		{":method", "POST"},
		{":scheme", c.cfg.scheme},
		{":path", c.cfg.path},
		{":authority", c.cfg.authority},
		{"content-type", "application/grpc"},
		{"te", "trailers"},
		{"user-agent", DefaultUserAgent},
	} {
		c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := c.hbuf.Bytes()
	first := block[:min(len(block), maxFrame)]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(first) == len(block)})
	for rest := block[len(first):]; err == nil && len(rest) > 0; {
		n := min(len(rest), maxFrame)
		err = c.fr.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	if err = c.unlockWrite(err); err != nil {
		err = fmt.Errorf("grpc: opening a stream: %w", err)
		c.fail(err)
		return nil, err
	}
	return s, nil
}

// lockWrite takes wmu to write frames.
func (c *h2Conn) lockWrite() {
	c.writers.Add(1)
	c.wmu.Lock()
}

// unlockWrite flushes the frames unless another writer is waiting (the
// last one flushes), releases wmu and returns the first error.
func (c *h2Conn) unlockWrite(err error) error {
	if err != nil || c.writers.Load() == 1 {
		if ferr := c.bw.Flush(); err == nil {
			err = ferr
		}
	}
	c.writers.Add(-1)
	c.wmu.Unlock()
	return err
}

// credit returns n consumed bytes to the connection window, sending a
// WINDOW_UPDATE when enough piled up.
func (c *h2Conn) credit(n int64) {
	c.mu.Lock()
	c.unacked += n
	upd := int64(0)
	if c.unacked >= connUpdateAt && c.err == nil {
		upd, c.unacked = c.unacked, 0
		c.recvLeft += upd
	}
	c.mu.Unlock()
	if upd > 0 {
		c.writeWindowUpdate(0, upd)
	}
}

// forget drops a closed stream; the last one out of a connection that went
// away closes it, and of any other starts the idle timer. (A connection its
// slot retired is closed by the slot once its last stream is released.)
func (c *h2Conn) forget(s *h2Stream) {
	c.mu.Lock()
	delete(c.streams, s.id)
	empty := len(c.streams) == 0 && c.err == nil
	closeNow := empty && c.goAway
	if empty && !closeNow {
		if c.idle == nil {
			c.idle = time.AfterFunc(idleTimeout, c.closeIfIdle)
		} else {
			c.idle.Reset(idleTimeout)
		}
	}
	c.mu.Unlock()
	if closeNow {
		c.shutdown(net.ErrClosed, false)
	}
}

// closeIfIdle closes the connection if still no stream is open; no stream
// can open once it decided.
func (c *h2Conn) closeIfIdle() {
	c.mu.Lock()
	idle := len(c.streams) == 0 && c.err == nil
	if idle {
		c.err = errH2Idle
	}
	c.mu.Unlock()
	if idle {
		c.raw.Close()
	}
}

// shutdown ends the connection with err (the first error wins): every
// stream fails with it and the socket closes. wait also waits for the read
// loop, which must not be the caller.
func (c *h2Conn) shutdown(err error, wait bool) {
	c.fail(err)
	if wait {
		<-c.loopDone
	}
}

// fail records err, fails every stream and closes the socket. A failure
// that is not this side's close (net.ErrClosed, ErrClosed, errH2Idle) is
// the shared connection's: every stream gets the same error, a
// netx.FaultCarrier with one episode.
func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if !errors.Is(err, net.ErrClosed) && !errors.Is(err, ErrClosed) && !errors.Is(err, errH2Idle) {
		err = netx.WithEpisode(err, netx.FaultCarrier, netx.NewEpisode())
	}
	c.err = err
	if c.idle != nil {
		c.idle.Stop()
	}
	streams := make([]*h2Stream, 0, len(c.streams))
	for _, s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	for _, s := range streams {
		s.fail(err, false)
	}
	c.raw.Close()
}

func (c *h2Conn) stream(id uint32) *h2Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}
