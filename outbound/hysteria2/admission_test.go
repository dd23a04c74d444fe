package hysteria2_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/hysteria2/internal/hy2test"
	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
	"switchyard/supervisor"
	"switchyard/test/socksclient"
)

// Streams on a Hysteria 2 connection already up are logical opens: they
// pass while the generation's only admission permit is held by a dial stuck
// on a silent server.
func TestStreamsOnALiveConnectionPassAFullGate(t *testing.T) {
	srv := hy2test.Start(t, hy2test.Options{})
	echo := echoServer(t)
	silent := proxytest.Listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	s := reuseSpec(srv, hy2test.Password)
	s.Dial.MaxConcurrentDials = 1
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "stuck", Type: "socks", Server: silent, AddressFamily: "auto"})
	s.Rules = []spec.Rule{{Port: []uint16{9}, Outbound: "stuck"}}
	sv, err := supervisor.New(s, supervisor.Options{Logger: slog.New(slog.DiscardHandler), Gate: netx.NewGate(8)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	proxy := sv.Addr("socks-in").String()

	proxytest.Echoes(t, socksDial(t, proxy, echo), []byte("brings the connection up"))

	stuck, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := socksclient.Greet(stuck, "", ""); err != nil {
		t.Fatal(err)
	}
	stuck.Write(socksclient.AppendAddr([]byte{5, 1, 0}, "127.0.0.1", 9))
	waitUntil(t, "the stuck dial to hold the permit", func() bool {
		gen, _ := sv.Admission()
		return gen.InUse == 1
	})

	for i := range 5 {
		c, err := socksclient.DialWithin(proxy, echo, "", "", 3*time.Second)
		if err != nil {
			t.Fatalf("stream %d waited behind the full gate: %v", i, err)
		}
		proxytest.Echoes(t, c, []byte(fmt.Sprintf("stream %d", i)))
		c.Close()
	}
	if gen, _ := sv.Admission(); gen.InUse != 1 || gen.Waiting != 0 {
		t.Fatalf("admission %+v", gen)
	}
}
