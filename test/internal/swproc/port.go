package swproc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// FreePort returns a loopback port nothing listens on now, for TCP and
// UDP, for a process the test starts to listen on next. Ports are picked
// below the kernel's ephemeral range (32768 up on Linux), which ":0"
// listeners and outgoing connections of the other test binaries running
// meanwhile draw from: a port found free here is not taken by one of
// them before the process binds it ("address already in use"). One test
// binary never hands out a port twice.
func FreePort(t testing.TB) int {
	t.Helper()
	usedPorts.Lock()
	defer usedPorts.Unlock()
	for range 200 {
		port := portLo + rand.IntN(portHi-portLo+1)
		if usedPorts.m[port] {
			continue
		}
		ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		pc.Close()
		usedPorts.m[port] = true
		return port
	}
	t.Fatal("no free port")
	return 0
}

const (
	portLo = 20000
	portHi = 32767
)

var usedPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}
