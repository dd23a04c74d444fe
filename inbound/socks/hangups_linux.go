package socks

import (
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangups watches the control connections of a server's associations for
// their end with one goroutine in all, through an epoll set of its own:
// EPOLLRDHUP reports the client's FIN, EPOLLHUP and EPOLLERR a reset. Data
// the client sends does not wake it; it is left unread, as the protocol
// gives it no meaning. Each connection is watched once (EPOLLONESHOT).
type hangups struct {
	epfd  int
	wake  int // an eventfd: Close writes it to stop the loop
	done  chan struct{}
	mu    sync.Mutex // guards next and ends
	next  uint32
	ends  map[uint32]func() // by the id in the epoll event; 0 is wake
	close func()
}

func newHangups() (*hangups, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, err
	}
	h := &hangups{epfd: epfd, wake: wake, done: make(chan struct{}), ends: make(map[uint32]func())}
	var once sync.Once
	h.close = func() {
		once.Do(func() {
			unix.Write(h.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
			<-h.done
			unix.Close(h.wake)
			unix.Close(h.epfd)
		})
	}
	go h.loop()
	return h, nil
}

// watch calls end, on the watcher's goroutine, once c's peer hangs up. It
// returns what stops the watch (to be called before c is closed), or nil
// when c is not a socket this watcher can see.
func (h *hangups) watch(c net.Conn, end func()) func() {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	h.mu.Lock()
	h.next++
	if h.next == 0 {
		h.next = 1
	}
	id := h.next
	h.ends[id] = end
	h.mu.Unlock()
	var added bool
	cerr := rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR | unix.EPOLLONESHOT, Fd: int32(id)}
		added = unix.EpollCtl(h.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) == nil
	})
	if cerr != nil || !added {
		h.forget(id)
		return nil
	}
	return func() {
		h.forget(id)
		rc.Control(func(fd uintptr) { unix.EpollCtl(h.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
	}
}

func (h *hangups) forget(id uint32) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.ends[id]
	delete(h.ends, id)
	return end
}

// loop waits for hang-ups until close.
func (h *hangups) loop() {
	defer close(h.done)
	var events [64]unix.EpollEvent
	for {
		n, err := unix.EpollWait(h.epfd, events[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			id := uint32(ev.Fd)
			if id == 0 {
				return
			}
			if end := h.forget(id); end != nil {
				end()
			}
		}
	}
}
