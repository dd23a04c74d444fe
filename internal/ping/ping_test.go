//go:build linux

package ping

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An echo to loopback, in a namespace of the test's own whose
// ping_group_range admits root, comes back with its data; a socket mark is
// set on the way.
func TestEchoLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it makes a network namespace")
	}
	var id [3]byte
	rand.Read(id[:])
	ns := "sy-ping-" + hex.EncodeToString(id[:])
	for _, c := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ping_group_range=0 0"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })

	runtime.LockOSThread() // the thread is left in the namespace: it ends with the test goroutine
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, dst := range []string{"127.0.0.1", "::1"} {
		got, err := Echo(ctx, Options{Mark: 7}, netip.MustParseAddr(dst), []byte("switchyard"))
		if err != nil || string(got) != "switchyard" {
			t.Fatalf("%s: %q, %v", dst, got, err)
		}
	}
}
