package shadowsocks

// The replay window of one server session's packet ids: a ring of 64-bit
// blocks, one bit per id. Ids more than windowSize behind the newest are
// refused as too old.
const (
	windowBlocks = 32 // a power of two
	windowSize   = (windowBlocks - 1) * 64
)

type replayWindow struct {
	newest uint64
	ring   [windowBlocks]uint64
	any    bool // an id was added
}

// fresh reports whether id may be accepted: ahead of the window, or inside
// it and not seen yet.
func (w *replayWindow) fresh(id uint64) bool {
	switch {
	case !w.any || id > w.newest:
		return true
	case w.newest-id >= windowSize:
		return false
	}
	return w.ring[(id>>6)%windowBlocks]&(1<<(id&63)) == 0
}

// add records id (checked by fresh), sliding the window when id is ahead.
func (w *replayWindow) add(id uint64) {
	block := id >> 6
	switch {
	case !w.any:
		w.any, w.newest = true, id
	case id > w.newest:
		last := w.newest >> 6
		for i := range min(block-last, windowBlocks) {
			w.ring[(last+i+1)%windowBlocks] = 0
		}
		w.newest = id
	}
	w.ring[block%windowBlocks] |= 1 << (id & 63)
}
