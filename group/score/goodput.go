package score

import "time"

// Directional goodput windows: a flow's accepted-TX and delivered-RX
// progress is cut into non-overlapping, event-driven windows of 1 to 10
// seconds. A window opens at a progress event (the bytes of that event
// precede it), closes at the first event at least WindowMin later, and
// the next opens at once; a window whose closing event comes more than
// WindowMax after its start spanned idle time and is discarded (idle or
// application-limited traffic proves nothing), the next opening there.
// A direction of a closed window is measured when it moved at least
// WindowBytes and the flow has had progress both ways and a response.
// Windows add no Beta success; no timer turns silence into progress.
const (
	WindowMin   = time.Second
	WindowMax   = 10 * time.Second
	WindowBytes = 64 << 10
)

type windows struct {
	start          int64 // 0: none open
	tx, rx         int64
	sawTX, sawRX   bool
	responded      bool
	upBps, downBps float64 // the latest closed window's measured directions (0: none)
}

// progress records tx and rx bytes at t; it reports whether a window
// closed with a measured direction (w.upBps / w.downBps).
func (w *windows) progress(t int64, tx, rx int64) bool {
	w.sawTX = w.sawTX || tx > 0
	w.sawRX = w.sawRX || rx > 0
	if w.start == 0 || t-w.start > int64(WindowMax) {
		w.open(t)
		return false
	}
	w.tx += max(tx, 0)
	w.rx += max(rx, 0)
	if t-w.start < int64(WindowMin) {
		return false
	}
	return w.close(t)
}

// finish closes the open window at t (the flow ended).
func (w *windows) finish(t int64) bool {
	if w.start == 0 || t-w.start < int64(WindowMin) || t-w.start > int64(WindowMax) {
		return false
	}
	return w.close(t)
}

func (w *windows) open(t int64) {
	w.start, w.tx, w.rx = t, 0, 0
}

func (w *windows) close(t int64) bool {
	secs := float64(t-w.start) / float64(time.Second)
	w.upBps, w.downBps = 0, 0
	if w.responded && w.sawTX && w.sawRX {
		if w.tx >= WindowBytes {
			w.upBps = float64(w.tx) / secs
		}
		if w.rx >= WindowBytes {
			w.downBps = float64(w.rx) / secs
		}
	}
	w.open(t)
	return w.upBps > 0 || w.downBps > 0
}
