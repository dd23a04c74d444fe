// Package store keeps the state switchyard carries across restarts: each
// selector group's choice per network, the last real delay measured
// through each node, the names the fake IP pool has handed addresses to,
// and the controller's settings: the routing mode the API set and the
// GLOBAL selector's choice. The state lives in one bbolt file ([state].path), or in memory only
// when the path is "".
//
// Keys are names — a group's tag and "tcp" or "udp", a node's tag — since
// names are what survive a restart. The fake IP mappings are one value, a
// snapshot the pool replaces whole: the store keeps the set it was last
// given, as large as it was given. Open reads the whole file into memory
// (it holds a few entries per group and node, and the fake IP set, kept
// encoded), so reads never touch the disk, and a reload within one process, which keeps the same Store, sees
// every value set before it. Entries of groups and nodes that no longer
// exist stay in the file; nothing reads them.
//
// Writes never block the caller. A Set updates the memory copy and queues
// the entry for the store's own goroutine, which writes the queue in one
// transaction per round. The queue holds the latest value per key and at
// most a fixed number of keys: past that it is dropped and the next round
// writes the whole memory copy instead, so no value is lost however slow
// the disk is. A write that fails is logged once at warn (later failures at
// debug until one succeeds) and the next round writes the whole copy again.
// Close writes what is queued, stops the goroutine and closes the file.
//
// A state file that cannot be used never stops the start: a file another
// process holds (bbolt locks it; Open waits a second), a file that is not a
// bbolt database or fails its consistency check, or one that cannot be
// created, is logged in one warn line naming the path and the reason, and
// the store runs in memory for the rest of the process. The file is left as
// it is, so nothing the user has is overwritten or moved: they can inspect
// it, delete it or point [state].path elsewhere.
//
// # Format
//
// Four buckets, "selector_choices", "last_delays", "fake_ips" and
// "controller". A key is a sequence of names, each written as its length
// (unsigned varint) and its bytes: group then network for a choice, the
// node for a delay, the one name "mappings" for the fake IPs, the names
// "mode" and "global" in the controller's bucket (no group tag can name
// them there). Every value starts with a format byte, 1 today:
//
//	selector choice: 1, member name
//	GLOBAL choice:   1, member name ("" once cleared)
//	mode:            1, the mode the API set and the file's mode then,
//	                 each as a name
//	last delay:      1, RTT in nanoseconds (varint), At as Unix seconds
//	                 (varint) and nanoseconds (unsigned varint)
//	fake IPs:        1, the number of mappings (unsigned varint), then for
//	                 each: its name (length and bytes, as in keys), V4
//	                 and V6 (each a length byte, 0, 4 or 16, and that
//	                 many address bytes), LastUsed as At above
//
// A value with another format byte, or one that does not decode, is ignored
// with a debug line, never a failure: a future format is detectable, and an
// older binary reading a newer file starts those entries afresh.
package store
