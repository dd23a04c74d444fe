package group

import (
	"sync"

	"switchyard/netx"
)

// InterruptQueue bounds the automatic switches waiting for their
// interruption; a switch beyond it is logged and interrupts nothing.
const InterruptQueue = 64

// job is one automatic switch whose old member's flows are to be closed.
type job struct {
	g, member int32
	net       netx.Network
}

// worker runs OnInterrupt for automatic switches (URLTest, Fallback) off
// the selecting goroutine. The Manager owns it: Close stops it.
type worker struct {
	m    *Manager
	jobs chan job
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startWorker(m *Manager) *worker {
	w := &worker{m: m, jobs: make(chan job, InterruptQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *worker) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case j := <-w.jobs:
			g := &w.m.groups[j.g]
			w.m.o.OnInterrupt(g.tag, g.members[j.member].tag, j.net)
		}
	}
}

// send queues j without blocking.
func (w *worker) send(j job) {
	select {
	case <-w.stop:
		return
	default:
	}
	select {
	case w.jobs <- j:
	default:
		g := &w.m.groups[j.g]
		w.m.log.Warn("interrupt queue full; the old member's flows are not closed", "group", g.tag, "member", g.members[j.member].tag, "network", j.net.String())
	}
}

func (w *worker) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
