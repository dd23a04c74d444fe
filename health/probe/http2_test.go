package probe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2w writes a scripted HTTP/2 server's frames.
type h2w struct {
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

// headers writes one HEADERS frame of name, value pairs on sid.
func (w *h2w) headers(sid uint32, end bool, kv ...string) {
	w.buf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		w.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: w.buf.Bytes(), EndStream: end, EndHeaders: true})
}

// h2Server is an HTTP/2 server (prior knowledge, no TLS) on loopback that
// answers each stream as its script says and records the methods it saw.
type h2Server struct {
	ln      net.Listener
	startup func(w *h2w) // the server's first frames; nil: an empty SETTINGS
	script  func(w *h2w, sid uint32)
	wg      sync.WaitGroup

	mu      sync.Mutex
	methods []string
	pingAck bool
	conns   []net.Conn
}

func newH2Server(t *testing.T, script func(w *h2w, sid uint32)) *h2Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2Server{ln: ln, script: script}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *h2Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	w := &h2w{c: c, fr: http2.NewFramer(c, c)}
	w.enc = hpack.NewEncoder(&w.buf)
	w.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if s.startup != nil {
		s.startup(w)
	} else {
		w.fr.WriteSettings()
	}
	for {
		f, err := w.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				w.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() {
				s.mu.Lock()
				s.pingAck = true
				s.mu.Unlock()
			}
		case *http2.MetaHeadersFrame:
			s.mu.Lock()
			s.methods = append(s.methods, f.PseudoValue("method"))
			s.mu.Unlock()
			s.script(w, f.StreamID)
		}
	}
}

func (s *h2Server) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.methods)
}

// probeH2 runs the HTTP/2 part of a probe of method against s.
func probeH2(t *testing.T, s *h2Server, opts Options, method string) (time.Duration, error) {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tg, err := parseTarget("https://probe.test/generate_204")
	if err != nil {
		t.Fatal(err)
	}
	p := New(&testDialer{}, opts).(*prober)
	return p.http2(within(t, 5*time.Second), c, c, &tg, method)
}

func status(code string) []string { return []string{":status", code} }

func TestHTTP2Rounds(t *testing.T) {
	const slowFirst = 120 * time.Millisecond
	ok := func(w *h2w, sid uint32) { w.headers(sid, true, status("204")...) }
	slowThen := func(second func(w *h2w)) func(w *h2w, sid uint32) {
		return func(w *h2w, sid uint32) {
			if sid == 1 {
				time.Sleep(slowFirst)
				w.headers(1, true, status("204")...)
				return
			}
			second(w)
		}
	}
	pad := func(size int) []string { // a header list of size bytes, as HTTP/2 counts
		return []string{":status", "200", "x-pad", strings.Repeat("p", size-(7+3+32)-(5+32))}
	}
	cases := []struct {
		name   string
		script func(w *h2w, sid uint32)
		want   error // nil: success; errRefused: the warm-up sample
	}{
		{"204", ok, nil},
		{"404", func(w *h2w, sid uint32) { w.headers(sid, true, status("404")...) }, nil},
		{"500", func(w *h2w, sid uint32) { w.headers(sid, true, status("500")...) }, &StatusError{Code: 500}},
		{"informational heads", func(w *h2w, sid uint32) {
			w.headers(sid, false, status("103")...)
			w.headers(sid, false, status("100")...)
			w.headers(sid, true, status("200")...)
		}, nil},
		{"101", func(w *h2w, sid uint32) { w.headers(sid, false, status("101")...) }, ErrSwitch},
		{"an informational head ending the stream", func(w *h2w, sid uint32) { w.headers(sid, true, status("103")...) }, ErrProtocol},
		{"no status", func(w *h2w, sid uint32) { w.headers(sid, true, "x-a", "b") }, ErrProtocol},
		{"a request pseudo-header", func(w *h2w, sid uint32) { w.headers(sid, true, ":status", "200", ":path", "/") }, ErrProtocol},
		{"a bad status", func(w *h2w, sid uint32) { w.headers(sid, true, status("2000")...) }, ErrProtocol},
		{"an uppercase field name", func(w *h2w, sid uint32) { w.headers(sid, true, ":status", "200", "X-Up", "1") }, ErrProtocol},
		{"16 KiB header list", func(w *h2w, sid uint32) { w.headers(sid, true, pad(MaxHead)...) }, nil},
		{"16 KiB + 1 header list", func(w *h2w, sid uint32) { w.headers(sid, true, pad(MaxHead+1)...) }, ErrHeadTooLarge},
		{"informational lists past 16 KiB together", func(w *h2w, sid uint32) {
			w.headers(sid, false, ":status", "103", "link", strings.Repeat("l", MaxHead/2))
			w.headers(sid, true, ":status", "200", "x-pad", strings.Repeat("p", MaxHead/2))
		}, ErrHeadTooLarge},
		{"PUSH_PROMISE", func(w *h2w, sid uint32) {
			w.fr.WritePushPromise(http2.PushPromiseParam{StreamID: sid, PromiseID: 2, EndHeaders: true})
			w.headers(sid, true, status("200")...)
		}, ErrProtocol},
		{"DATA before the head", func(w *h2w, sid uint32) {
			w.fr.WriteData(sid, false, []byte("x"))
			w.headers(sid, true, status("200")...)
		}, ErrProtocol},
		{"HEADERS on a stream never opened", func(w *h2w, sid uint32) { w.headers(sid+2, true, status("200")...) }, ErrProtocol},
		{"a PING is answered", func(w *h2w, sid uint32) {
			w.fr.WritePing(false, [8]byte{1})
			w.headers(sid, true, status("200")...)
		}, nil},
		{"a late frame of the warm-up stream is ignored", func(w *h2w, sid uint32) {
			if sid == 1 {
				w.headers(1, false, status("200")...)
				return
			}
			w.fr.WriteData(1, true, nil)
			w.fr.WriteRSTStream(1, http2.ErrCodeCancel)
			w.headers(3, true, status("200")...)
		}, nil},
		{"a graceful GOAWAY refusing the second stream", slowThen(func(w *h2w) { w.fr.WriteGoAway(1, http2.ErrCodeNo, nil) }), errRefused},
		{"REFUSED_STREAM", slowThen(func(w *h2w) { w.fr.WriteRSTStream(3, http2.ErrCodeRefusedStream) }), errRefused},
		{"another reset", slowThen(func(w *h2w) { w.fr.WriteRSTStream(3, http2.ErrCodeInternal) }), errors.New("reset")},
		{"an error GOAWAY", slowThen(func(w *h2w) { w.fr.WriteGoAway(1, http2.ErrCodeProtocol, nil) }), errors.New("GOAWAY")},
		{"a GOAWAY that keeps the stream, then its answer", slowThen(func(w *h2w) {
			w.fr.WriteGoAway(3, http2.ErrCodeNo, nil)
			w.headers(3, true, status("200")...)
		}), nil},
		{"rejected headers, then REFUSED_STREAM", slowThen(func(w *h2w) {
			w.headers(3, true, pad(MaxHead+1)...)
			w.fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
		}), ErrHeadTooLarge},
		{"an informational head, then REFUSED_STREAM", slowThen(func(w *h2w) {
			w.headers(3, false, status("103")...)
			w.fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
		}), errors.New("reset")},
		{"closed without an answer", slowThen(func(w *h2w) { w.c.Close() }), errors.New("EOF")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH2Server(t, tc.script)
			rtt, err := probeH2(t, s, Options{}, "GET")
			switch {
			case tc.want == nil:
				if err != nil {
					t.Fatal(err)
				}
				if got := s.seen(); !slices.Equal(got, []string{"HEAD", "GET"}) {
					t.Fatalf("server saw %v; want HEAD then GET", got)
				}
			case errors.Is(tc.want, errRefused):
				if err != nil || rtt < slowFirst {
					t.Fatalf("%v, %v; want the warm-up sample (at least %v)", rtt, err, slowFirst)
				}
			default:
				checkErr(t, err, tc.want)
			}
			if tc.name == "a PING is answered" {
				s.mu.Lock()
				acked := s.pingAck
				s.mu.Unlock()
				if !acked {
					t.Fatal("the PING was not acknowledged")
				}
			}
		})
	}
}

func TestHTTP2Startup(t *testing.T) {
	ok := func(w *h2w, sid uint32) { w.headers(sid, true, status("200")...) }
	s := newH2Server(t, ok)
	s.startup = func(w *h2w) { w.fr.WritePing(false, [8]byte{}) }
	if _, err := probeH2(t, s, Options{}, "HEAD"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a first frame other than SETTINGS: %v", err)
	}
	s = newH2Server(t, ok)
	s.startup = func(w *h2w) { w.fr.WriteSettingsAck() }
	if _, err := probeH2(t, s, Options{}, "HEAD"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a first frame that is an acknowledgment: %v", err)
	}
	s = newH2Server(t, ok)
	s.startup = func(w *h2w) { time.Sleep(time.Second) } // silence
	start := time.Now()
	_, err := probeH2(t, s, Options{Timeouts: Timeouts{HTTP2Startup: 100 * time.Millisecond}}, "HEAD")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("a silent server: %v after %v", err, time.Since(start))
	}
	// A silent second stream fails at the request budget: only a refusal
	// leaves the warm-up sample over HTTP/2.
	s = newH2Server(t, func(w *h2w, sid uint32) {
		if sid == 1 {
			w.headers(1, true, status("200")...)
		}
	})
	_, err = probeH2(t, s, Options{Timeouts: Timeouts{Request: 100 * time.Millisecond}}, "HEAD")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a silent second stream: %v", err)
	}
}

// The probe's SETTINGS disable push and cap the header list.
func TestHTTP2Settings(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	got := make(chan []http2.Setting, 1)
	go func() {
		io.ReadFull(b, make([]byte, len(http2.ClientPreface)))
		fr := http2.NewFramer(b, b)
		f, err := fr.ReadFrame()
		var ss []http2.Setting
		if sf, ok := f.(*http2.SettingsFrame); ok && err == nil {
			sf.ForeachSetting(func(s http2.Setting) error { ss = append(ss, s); return nil })
		}
		got <- ss
		b.Close()
	}()
	newH2(a).start()
	ss := <-got
	want := []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingMaxConcurrentStreams, Val: 0},
		{ID: http2.SettingMaxHeaderListSize, Val: MaxHead},
	}
	if !slices.Equal(ss, want) {
		t.Fatalf("settings %v; want %v", ss, want)
	}
}
