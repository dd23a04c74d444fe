package transport

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/net/http2"

	"switchyard/netx"
)

// readLoop reads the server's frames until the connection ends and hands
// each to its stream.
func (c *h2Conn) readLoop() {
	defer close(c.loopDone)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if s := c.stream(se.StreamID); s != nil {
					s.fail(netx.WithFault(fmt.Errorf("grpc: the server broke the stream: %w", err), netx.FaultStreamReset), true)
				}
				continue
			}
			c.fail(fmt.Errorf("grpc: the connection to the server broke: %w", err))
			return
		}
		if err := c.handle(f); err != nil {
			c.writeGoAway(http2.ErrCodeProtocol)
			c.fail(err)
			return
		}
	}
}

// handle acts on one frame; an error ends the connection.
func (c *h2Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.MetaHeadersFrame:
		if s := c.stream(f.StreamID); s != nil {
			s.onHeaders(f)
		}
	case *http2.RSTStreamFrame:
		if s := c.stream(f.StreamID); s != nil {
			s.onReset(f.ErrCode)
		}
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return c.onSettings(f)
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			c.lockWrite()
			c.unlockWrite(c.fr.WritePing(true, f.Data))
		}
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		return errors.New("grpc: the server pushed a stream, and push is disabled")
	}
	return nil
}

func (c *h2Conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)
	c.mu.Lock()
	c.recvLeft -= n
	over := c.recvLeft < 0
	s := c.streams[f.StreamID]
	c.mu.Unlock()
	if over {
		return errH2FlowControl
	}
	if s == nil {
		c.credit(n) // a stream already closed here: nobody will read it
		return nil
	}
	data := f.Data()
	if s.push(data, n, f.StreamEnded()) {
		c.credit(n)
	} else if pad := n - int64(len(data)); pad > 0 {
		c.credit(pad)
	}
	return nil
}

// onSettings applies the server's settings and acknowledges them.
func (c *h2Conn) onSettings(f *http2.SettingsFrame) error {
	var (
		tableSize uint32
		setTable  bool
	)
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			if s.Val > math.MaxInt32 {
				return errors.New("grpc: the server's initial window is over 2^31-1")
			}
			delta := int64(s.Val) - c.peerWindow
			c.peerWindow = int64(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
				signal(st.wwake)
			}
		case http2.SettingMaxFrameSize:
			if s.Val < 16384 || s.Val > 1<<24-1 {
				return fmt.Errorf("grpc: the server's max frame size %d is out of range", s.Val)
			}
			c.maxFrame = int(s.Val)
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingHeaderTableSize:
			tableSize, setTable = s.Val, true
		}
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.lockWrite()
	if setTable {
		c.henc.SetMaxDynamicTableSizeLimit(tableSize)
	}
	return c.unlockWrite(c.fr.WriteSettingsAck())
}

func (c *h2Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += inc
		if c.sendWindow > math.MaxInt32 {
			return errors.New("grpc: the server grew the connection window over 2^31-1")
		}
		for _, s := range c.streams {
			signal(s.wwake) // never blocks
		}
	} else if s := c.streams[f.StreamID]; s != nil {
		s.sendWindow += inc
		signal(s.wwake)
	}
	return nil
}

// onGoAway takes no new stream here and fails the streams the server did
// not take; the connection closes when its last stream ends.
func (c *h2Conn) onGoAway(f *http2.GoAwayFrame) {
	var lost []*h2Stream
	c.mu.Lock()
	c.goAway = true
	for id, s := range c.streams {
		if id > f.LastStreamID {
			lost = append(lost, s)
		}
	}
	c.mu.Unlock()
	// One GOAWAY is one failure of the shared connection for every stream
	// it did not take.
	ga := netx.WithEpisode(errH2GoingAway, netx.FaultCarrier, netx.NewEpisode())
	for _, s := range lost {
		s.fail(ga, false)
	}
}

func (c *h2Conn) writeData(id uint32, end bool, p []byte) error {
	c.lockWrite()
	return c.unlockWrite(c.fr.WriteData(id, end, p))
}

func (c *h2Conn) writeWindowUpdate(id uint32, n int64) {
	c.lockWrite()
	c.unlockWrite(c.fr.WriteWindowUpdate(id, uint32(n)))
}

func (c *h2Conn) writeReset(id uint32, code http2.ErrCode) {
	c.lockWrite()
	c.unlockWrite(c.fr.WriteRSTStream(id, code))
}

// writeGoAway tells the server the connection is over; a client processed
// no stream of the server's, so the last stream is 0.
func (c *h2Conn) writeGoAway(code http2.ErrCode) {
	c.lockWrite()
	c.unlockWrite(c.fr.WriteGoAway(0, code, nil))
}

// signal wakes the one waiter of ch, if any, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
