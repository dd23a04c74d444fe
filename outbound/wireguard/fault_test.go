package wireguard

import (
	"errors"
	"net/netip"
	"testing"

	"switchyard/netx"
)

// A connect inside the tunnel that an address refused proves the tunnel
// works and the target said no; timeouts alone prove nothing about whom.
// The refusal is the gVisor adapter's error, which carries only the text
// of tcpip.ErrConnectionRefused.
func TestConnectErrorFault(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.1")
	refused := &connectError{attempts: []attempt{{ip, errConnectTimedOut}, {ip, errors.New("connection was refused")}}}
	if f, _ := netx.FaultOf(refused); f != netx.FaultTargetRefused {
		t.Fatalf("a refused connect: fault %v", f)
	}
	silent := &connectError{attempts: []attempt{{ip, errConnectTimedOut}}}
	if f, _ := netx.FaultOf(silent); f != netx.FaultNone {
		t.Fatalf("a timed-out connect: fault %v", f)
	}
	if f, _ := netx.FaultOf(ErrTunnelDown); f != netx.FaultSharedDial {
		t.Fatalf("tunnel down: fault %v", f)
	}
}

func isRetired(err error) bool {
	f, _ := netx.FaultOf(err)
	return f == netx.FaultRetired
}
