package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func writeFrame(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	if _, err := c.Write(append(frame, b...)); err != nil {
		t.Fatal(err)
	}
}

func readFrame(t *testing.T, c net.Conn) *dns.Msg {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return unpack(t, b)
}

// Pipelined queries are answered in the order they were sent, even when
// the first takes longest.
func TestStreamAnswersInOrder(t *testing.T) {
	x := exchangeFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
		if q.Question[0].Name == "slow.test." {
			time.Sleep(50 * time.Millisecond)
		}
		return answerA(q, 1), nil
	})
	c := New(x, Options{}).Stream()
	defer c.Close()
	go func() {
		// net.Pipe writes block until read: write from a goroutine.
		for i, name := range []string{"slow.test.", "fast.test.", "fast.test."} {
			frame := binary.BigEndian.AppendUint16(nil, 0)
			q := mkQuery(t, uint16(i+1), name, dns.TypeA, 0)
			binary.BigEndian.PutUint16(frame, uint16(len(q)))
			if _, err := c.Write(append(frame, q...)); err != nil {
				return
			}
		}
	}()
	for want := uint16(1); want <= 3; want++ {
		if r := readFrame(t, c); r.Id != want || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("answer %d (rcode %d), want %d", r.Id, r.Rcode, want)
		}
	}
}

// A message that gets no reply (a response) does not end the stream; a big
// answer comes whole, with no TC, over TCP.
func TestStreamGoesOnAfterAMessageWithNoReply(t *testing.T) {
	c := New(fixed(300), Options{}).Stream()
	defer c.Close()
	resp := mkQuery(t, 1, "a.test.", dns.TypeA, 0)
	resp[2] |= 0x80
	writeFrame(t, c, resp)
	writeFrame(t, c, mkQuery(t, 2, "a.test.", dns.TypeA, 0))
	r := readFrame(t, c)
	if r.Id != 2 || r.Truncated || len(r.Answer) != 300 {
		t.Fatalf("id %d tc %v answers %d", r.Id, r.Truncated, len(r.Answer))
	}
}

// CloseWrite: the answers due are written, then the client reads EOF.
func TestStreamCloseWriteFlushesAnswers(t *testing.T) {
	c := New(fixed(1), Options{}).Stream()
	defer c.Close()
	writeFrame(t, c, mkQuery(t, 1, "a.test.", dns.TypeA, 0))
	writeFrame(t, c, mkQuery(t, 2, "b.test.", dns.TypeA, 0))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for want := uint16(1); want <= 2; want++ {
		if r := readFrame(t, c); r.Id != want {
			t.Fatalf("answer %d, want %d", r.Id, want)
		}
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the answers: %v, want EOF", err)
	}
	if _, err := c.Write([]byte{0}); err == nil {
		t.Fatal("write after CloseWrite succeeded")
	}
}

// The service ends a stream on a query longer than MaxQuerySize, and on
// one whose bytes stop coming.
func TestStreamEndsOnAnOversizedOrStalledQuery(t *testing.T) {
	t.Run("oversized", func(t *testing.T) {
		s := New(fixed(1), Options{})
		c := s.Stream()
		defer c.Close()
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, MaxQuerySize+1)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read: %v, want EOF", err)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		s := New(fixed(1), Options{Timeout: 30 * time.Millisecond})
		c := s.Stream()
		defer c.Close()
		if _, err := c.Write([]byte{0, 40, 1, 2}); err != nil { // 2 of 40 bytes
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read: %v, want EOF", err)
		}
	})
}

// A stream with no query for the idle timeout ends.
func TestStreamIdleTimeout(t *testing.T) {
	s := New(fixed(1), Options{})
	s.idle = 30 * time.Millisecond
	c := s.Stream()
	defer c.Close()
	writeFrame(t, c, mkQuery(t, 1, "a.test.", dns.TypeA, 0))
	readFrame(t, c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read: %v, want EOF", err)
	}
}

// A client that does not read its answers: the write times out and the
// service ends the stream.
func TestStreamEndsWhenTheClientDoesNotRead(t *testing.T) {
	s := New(fixed(1), Options{Timeout: 30 * time.Millisecond})
	c := s.Stream()
	defer c.Close()
	writeFrame(t, c, mkQuery(t, 1, "a.test.", dns.TypeA, 0))
	time.Sleep(200 * time.Millisecond) // the answer's write gives up
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read: %v, want EOF", err)
	}
	if st := s.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The client's deadlines work.
func TestStreamDeadlines(t *testing.T) {
	c := New(fixed(1), Options{}).Stream()
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write([]byte{0}); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write: %v", err)
	}
}

// Close returns once the stream's goroutines have ended, cancelling a
// query in progress.
func TestStreamCloseCancelsQueries(t *testing.T) {
	started := make(chan struct{})
	x := exchangeFunc(func(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	c := New(x, Options{Timeout: time.Hour}).Stream()
	writeFrame(t, c, mkQuery(t, 1, "a.test.", dns.TypeA, 0))
	<-started
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// At most MaxInFlight queries are held: the service stops reading.
func TestStreamBoundsQueriesInFlight(t *testing.T) {
	release := make(chan struct{})
	x := exchangeFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return answerA(q, 1), nil
	})
	s := New(x, Options{MaxInFlight: 2, Timeout: time.Hour})
	c := s.Stream()
	defer c.Close()
	// The writer holds one, the queue two: the fourth query is read, the
	// fifth is not.
	for i := range 4 {
		writeFrame(t, c, mkQuery(t, uint16(i), "a.test.", dns.TypeA, 0))
	}
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	q := mkQuery(t, 9, "a.test.", dns.TypeA, 0)
	_, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("fifth query: %v, want it not read", err)
	}
	close(release)
	c.SetWriteDeadline(time.Time{})
	for want := range uint16(4) {
		if r := readFrame(t, c); r.Id != want {
			t.Fatalf("answer %d, want %d", r.Id, want)
		}
	}
}
