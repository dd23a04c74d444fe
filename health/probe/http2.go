package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ErrProtocol is matched by an HTTP/2 protocol error the probe detected
// itself, or one the framer reported; either ends the probe connection.
var ErrProtocol = errors.New("HTTP/2 protocol error")

// errRefused is a second round the server declined without processing it:
// a graceful GOAWAY that excludes the stream, or REFUSED_STREAM before any
// response head. Only then may the warm-up sample stand in.
var errRefused = errors.New("the server refused the request")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// h2 is the HTTP/2 side of one probe connection: one goroutine writes
// requests and reads frames; at most two streams (1 and 3) are opened.
type h2 struct {
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // the next stream to open
}

func newH2(c net.Conn) *h2 {
	h := &h2{c: c, next: 1}
	h.fr = http2.NewFramer(c, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = MaxHead
	h.fr.SetMaxReadFrameSize(16 << 10) // the default SETTINGS_MAX_FRAME_SIZE, which the probe keeps
	h.enc = hpack.NewEncoder(&h.hbuf)
	return h
}

// start sends the preface and the probe's SETTINGS (push disabled, the
// header list cap) and waits for the server's SETTINGS, which must come
// first, and acknowledges them.
func (h *h2) start() error {
	if _, err := io.WriteString(h.c, http2.ClientPreface); err != nil {
		return err
	}
	err := h.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: MaxHead},
	)
	if err != nil {
		return err
	}
	f, err := h.fr.ReadFrame()
	if err != nil {
		return frameErr(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	switch {
	case !ok:
		return protoErr("the server's first frame is %v, not SETTINGS", f.Header().Type)
	case sf.IsAck():
		return protoErr("the server's first frame acknowledges SETTINGS instead of sending its own")
	}
	return h.settings(sf)
}

// settings checks and applies a server's SETTINGS and acknowledges them.
func (h *h2) settings(f *http2.SettingsFrame) error {
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		if s.ID == http2.SettingHeaderTableSize {
			h.enc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err != nil {
		return protoErr("SETTINGS: %v", err)
	}
	return h.fr.WriteSettingsAck()
}

// frameErr marks the framer's own detections as protocol errors; read
// failures of the connection stay what they are.
func frameErr(err error) error {
	var ce http2.ConnectionError
	var se http2.StreamError
	if errors.As(err, &ce) || errors.As(err, &se) || errors.Is(err, http2.ErrFrameTooLarge) {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return err
}

// round opens the next stream with method and reads frames until its
// final response head. It returns the time from the HEADERS write to that
// head. Frames of an earlier stream of the probe (late DATA, trailers,
// resets) are ignored; anything that could not be valid ends the probe.
func (h *h2) round(t *target, method string) (time.Duration, error) {
	sid := h.next
	if sid > 3 {
		return 0, errors.New("probe: no more than two streams")
	}
	h.next += 2
	h.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: method},
		{Name: ":scheme", Value: t.scheme()},
		{Name: ":authority", Value: t.authority},
		{Name: ":path", Value: t.path},
		{Name: "user-agent", Value: userAgent},
		{Name: "accept", Value: "*/*"},
	} {
		h.enc.WriteField(f) // writes to a bytes.Buffer, which cannot fail
	}
	start := time.Now()
	err := h.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      sid,
		BlockFragment: h.hbuf.Bytes(),
		EndStream:     true,
		EndHeaders:    true,
	})
	if err != nil {
		return 0, err
	}
	total := 0   // the header list sizes of this round
	got := false // a head of this stream arrived
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return 0, frameErr(err)
		}
		id := f.Header().StreamID
		earlier := id != 0 && id < sid && id%2 == 1
		switch f.(type) {
		case *http2.MetaHeadersFrame, *http2.DataFrame, *http2.RSTStreamFrame:
			if id != sid && !earlier {
				return 0, protoErr("%v on stream %d, which the probe never opened", f.Header().Type, id)
			}
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if earlier {
				continue
			}
			got = true
			if f.Truncated {
				return 0, ErrHeadTooLarge
			}
			for _, hf := range f.Fields {
				total += int(hf.Size())
			}
			if total > MaxHead {
				return 0, ErrHeadTooLarge
			}
			status, err := h2Status(f)
			if err != nil {
				return 0, err
			}
			switch {
			case status == 101:
				return 0, ErrSwitch
			case status < 200:
				if f.StreamEnded() {
					return 0, protoErr("an informational head ends the stream")
				}
				continue
			}
			return time.Since(start), checkStatus(status)
		case *http2.DataFrame:
			if !earlier {
				return 0, protoErr("DATA before the response head")
			}
		case *http2.RSTStreamFrame:
			if earlier {
				continue
			}
			if f.ErrCode == http2.ErrCodeRefusedStream && !got {
				return 0, errRefused
			}
			return 0, fmt.Errorf("the server reset the stream (%v)", f.ErrCode)
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				return 0, fmt.Errorf("the server sent GOAWAY (%v)", f.ErrCode)
			}
			if f.LastStreamID < sid {
				return 0, errRefused
			}
			// The server still answers this stream.
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := h.settings(f); err != nil {
					return 0, err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := h.fr.WritePing(true, f.Data); err != nil {
					return 0, err
				}
			}
		case *http2.PushPromiseFrame:
			return 0, protoErr("PUSH_PROMISE with push disabled")
		}
		// WINDOW_UPDATE, PRIORITY and unknown frames need nothing.
	}
}

// h2Status reads a response head's one pseudo-header, :status.
func h2Status(f *http2.MetaHeadersFrame) (int, error) {
	pf := f.PseudoFields()
	if len(pf) != 1 || pf[0].Name != ":status" {
		return 0, protoErr("a response head needs exactly one pseudo-header, :status")
	}
	v := pf[0].Value
	code, err := strconv.Atoi(v)
	if err != nil || len(v) != 3 || code < 100 {
		return 0, protoErr("status %q", v)
	}
	return code, nil
}
