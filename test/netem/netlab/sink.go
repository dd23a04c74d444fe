package netlab

import (
	"io"
	"net"
	"sync"
)

// Sink is a TCP server inside the namespace that reads and discards
// everything each connection sends: the far end of a bulk upload.
type Sink struct {
	Addr string // host:port on the namespace's end of the link
	ln   net.Listener
	wg   sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// StartSink starts a Sink in p's namespace. Close stops it and waits for
// its goroutines.
func (p *Path) StartSink() (*Sink, error) {
	ln, err := p.Listen()
	if err != nil {
		return nil, err
	}
	s := &Sink{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *Sink) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(io.Discard, c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// Close stops accepting, closes every open connection and waits.
func (s *Sink) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}
