package score

// lru is a bounded least-recently-used table of cells. The list is
// intrusive (each entry holds its key, its cell and its links in one
// allocation), so a hit allocates nothing. A cell removed from the table
// is marked dead: a reporter holding it sees that and drops its events,
// so eviction never lets an old reporter recreate or feed a cell.
//
// It is not safe for concurrent use; the Scorer's mutex guards it.
type lru[K comparable] struct {
	cap  int
	seq  uint64 // moves with every insertion and removal: the table's shape
	m    map[K]*entry[K]
	head entry[K] // sentinel: head.next is the most recent, head.prev the least
}

type entry[K comparable] struct {
	key        K
	c          cell
	prev, next *entry[K]
}

func newLRU[K comparable](capacity int) *lru[K] {
	l := &lru[K]{cap: capacity, m: make(map[K]*entry[K], capacity)}
	l.head.next, l.head.prev = &l.head, &l.head
	return l
}

func (l *lru[K]) len() int { return len(l.m) }

// peek returns the cell under k without refreshing it, or nil.
func (l *lru[K]) peek(k K) *cell {
	if e := l.m[k]; e != nil {
		return &e.c
	}
	return nil
}

// get returns the cell under k and makes it the most recent, or nil.
func (l *lru[K]) get(k K) *cell {
	e := l.m[k]
	if e == nil {
		return nil
	}
	l.unlink(e)
	l.pushFront(e)
	return &e.c
}

// add inserts a new cell under k (absent), evicting the least recent
// entry when the table is full, and returns it.
func (l *lru[K]) add(k K) *cell {
	if len(l.m) >= l.cap {
		l.remove(l.head.prev.key)
	}
	e := &entry[K]{key: k}
	l.seq++
	l.m[k] = e
	l.pushFront(e)
	return &e.c
}

// remove drops the entry under k and marks its cell dead.
func (l *lru[K]) remove(k K) {
	e := l.m[k]
	if e == nil {
		return
	}
	delete(l.m, k)
	l.seq++
	l.unlink(e)
	e.c.dead = true
}

// each calls f for every entry, most recent first; f may remove the entry
// it is given.
func (l *lru[K]) each(f func(k K, c *cell)) {
	for e := l.head.next; e != &l.head; {
		next := e.next
		f(e.key, &e.c)
		e = next
	}
}

func (l *lru[K]) unlink(e *entry[K]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (l *lru[K]) pushFront(e *entry[K]) {
	e.prev, e.next = &l.head, l.head.next
	l.head.next.prev = e
	l.head.next = e
}
