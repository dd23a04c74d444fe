package track_test

import (
	"testing"

	"switchyard/track"
)

// A flow's registration and its close: the table's insert and removal,
// its totals' entry included.
func BenchmarkConnOpenClose(b *testing.B) {
	tr := track.New()
	m := tcpMeta()
	b.ReportAllocs()
	for b.Loop() {
		tr.Conn(m, &countConn{}).Close()
	}
}
