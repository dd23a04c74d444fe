package netlab

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A delayLine is netem's "delay D" done in user space, for kernels built
// without sch_netem: two TUN devices, one in each namespace, and a copier
// per direction that holds every packet read from one device for D before
// writing it to the other, in order. It delays at the packet level exactly
// as a netem qdisc on each end of a veth does (TCP's handshake, its ACKs,
// every TLS record), so a connection over it pays the same round trips.
//
// Each direction's queue holds at most queueLimit packets (netem's default
// limit is 1000); a packet arriving at a full queue is dropped, as netem
// drops it.
//
// The delay may change while the line runs, and a loss rate may be set
// (netem's "loss P%"): each packet read is dropped with that probability,
// each way. The default is no loss.
type delayLine struct {
	host, peer *os.File
	wg         sync.WaitGroup
	closeOnce  sync.Once
	delay      atomic.Int64  // nanoseconds, for packets read from now on
	lossPPM    atomic.Uint32 // dropped packets per million; 0: none
}

const (
	queueLimit = 1000
	tunMTU     = 1500
)

// openTUN creates a TUN device (no packet information header) in the
// calling thread's network namespace and returns its descriptor.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:unix.IFNAMSIZ-1], name)
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("creating TUN device %s: %w", name, errno)
	}
	// Non-blocking, so the runtime poller serves reads and Close ends a
	// blocked one.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// startDelayLine copies packets between host and peer, each way after
// delay. It owns both files: close closes them and waits for its four
// goroutines.
func startDelayLine(host, peer *os.File, delay time.Duration) *delayLine {
	d := &delayLine{host: host, peer: peer}
	d.delay.Store(int64(delay))
	d.pump(host, peer)
	d.pump(peer, host)
	return d
}

type packet struct {
	due  time.Time
	data []byte
}

// pump starts the reader and the writer of one direction. The reader
// stamps each packet with its due time and queues it; the writer sleeps
// until each packet's due time and writes it. The writer ends when the
// reader closes the queue, which it does when its device is closed.
func (d *delayLine) pump(from, to *os.File) {
	q := make(chan packet, queueLimit)
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		defer close(q)
		buf := make([]byte, tunMTU+64)
		for {
			n, err := from.Read(buf)
			if err != nil {
				return // closed (or the device is gone): the line ends
			}
			if l := d.lossPPM.Load(); l > 0 && mrand.Uint32N(1_000_000) < l {
				continue // lost, as netem's loss drops it
			}
			p := packet{due: time.Now().Add(time.Duration(d.delay.Load())), data: append([]byte(nil), buf[:n]...)}
			select {
			case q <- p:
			default: // queue full: dropped, as netem's limit drops
			}
		}
	}()
	go func() {
		defer d.wg.Done()
		for p := range q {
			if w := time.Until(p.due); w > 0 {
				time.Sleep(w)
			}
			to.Write(p.data) // a write to a device going down is lost like any packet
		}
	}()
}

// close stops the line: both devices are closed (the kernel removes a
// non-persistent TUN device with its last descriptor) and every goroutine
// has returned.
func (d *delayLine) close() {
	d.closeOnce.Do(func() {
		d.host.Close()
		d.peer.Close()
		d.wg.Wait()
	})
}
