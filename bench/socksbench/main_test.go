package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// miniProxy is a minimal SOCKS5 CONNECT server (no authentication) that
// answers with the bound address in the given address type.
type miniProxy struct {
	ln   net.Listener
	atyp byte
	wg   sync.WaitGroup
}

func startMiniProxy(t *testing.T, atyp byte) *miniProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &miniProxy{ln: ln, atyp: atyp}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *miniProxy) serve(c net.Conn) {
	defer c.Close()
	var b [262]byte
	if _, err := io.ReadFull(c, b[:2]); err != nil {
		return
	}
	if _, err := io.ReadFull(c, b[:b[1]]); err != nil {
		return
	}
	c.Write([]byte{5, 0})
	if _, err := io.ReadFull(c, b[:4]); err != nil || b[3] != 1 {
		return
	}
	if _, err := io.ReadFull(c, b[:6]); err != nil {
		return
	}
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), binary.BigEndian.Uint16(b[4:6]))
	up, err := net.Dial("tcp", dst.String())
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	reply := []byte{5, 0, 0, p.atyp}
	switch p.atyp {
	case 1:
		reply = append(reply, 127, 0, 0, 1)
	case 3:
		reply = append(reply, 9)
		reply = append(reply, "localhost"...)
	case 4:
		reply = append(reply, netip.IPv6Loopback().AsSlice()...)
	}
	reply = append(reply, 0x12, 0x34)
	c.Write(reply)
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}

func TestSOCKSConnectReplyAddressTypes(t *testing.T) {
	s, err := startServers(netip.MustParseAddr("127.0.0.1"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, atyp := range []byte{1, 3, 4} {
		p := startMiniProxy(t, atyp)
		c, err := dialSOCKS(p.ln.Addr().String(), s.hold, time.Second)
		if err != nil {
			t.Fatalf("atyp %d: %v", atyp, err)
		}
		if _, err := c.Write([]byte{'z'}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 'z' {
			t.Fatalf("atyp %d: echo %q, %v", atyp, b, err)
		}
		c.Close()
	}
}

func TestSOCKSConnectRefused(t *testing.T) {
	p := startMiniProxy(t, 1)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dst := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	_, err := dialSOCKS(p.ln.Addr().String(), dst, time.Second)
	if err == nil || !strings.Contains(err.Error(), "connection refused (5)") {
		t.Fatalf("err = %v, want the refused reply", err)
	}
}

// TestRunAgainstMiniProxy runs every phase, briefly, against two in-process
// proxies (this process's own pid stands for both) and checks the report.
func TestRunAgainstMiniProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	a, b := startMiniProxy(t, 1), startMiniProxy(t, 1)
	pid := os.Getpid()
	c, err := parseFlags([]string{
		"-target", "a=" + a.ln.Addr().String() + "," + strconv.Itoa(pid),
		"-target", "b=" + b.ln.Addr().String() + "," + strconv.Itoa(pid),
		"-bulk", "300ms", "-rate", "300ms", "-warmup", "100ms",
		"-rounds", "2", "-conns", "50", "-batches", "2", "-quiet", "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(c, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"upload MiB/s", "download MiB/s", "connections/s", "p99 connect-to-first-byte",
		"KiB RSS per idle conn", "throughput >= 1.0x", "connection rate >= 1.0x", "memory per idle conn <= 0.7x",
		"peak RSS MiB (VmHWM", "peak RSS <= 1.0x",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(text, "error") || strings.Contains(text, "failed") {
		t.Errorf("report shows errors")
	}
}

// TestReportThreeTargets checks that a subject with two baselines gets a
// ratio column and a targets section for each, peak RSS included.
func TestReportThreeTargets(t *testing.T) {
	c, err := parseFlags([]string{
		"-target", "a=127.0.0.1:1,1", "-target", "b=127.0.0.1:2,1", "-target", "c=127.0.0.1:3,1",
		"-only", "up,rate",
	})
	if err != nil {
		t.Fatal(err)
	}
	res := []*results{
		{up: []bulkResult{{MiBps: 200}}, rate: []rateResult{{PerSec: 100, Count: 1}}, peakKiB: 50 << 10},
		{up: []bulkResult{{MiBps: 100}}, rate: []rateResult{{PerSec: 100, Count: 1}}, peakKiB: 100 << 10},
		{up: []bulkResult{{MiBps: 400}}, rate: []rateResult{{PerSec: 50, Count: 1}}, peakKiB: 25 << 10},
	}
	var out bytes.Buffer
	report(&out, c, res)
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"/b = a/b, /c = a/c", "targets (a vs b):", "targets (a vs c):",
		"2.00x", "0.50x", "peak RSS MiB (VmHWM, whole run)", "peak RSS <= 1.0x",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(text, "NOT MET"); n != 2 { // a vs c: upload, peak
		t.Errorf("%d targets NOT MET, want 2", n)
	}
	if _, err := parseFlags([]string{"-target", "a=127.0.0.1:1,1", "-target", "b=127.0.0.1:2,1",
		"-target", "c=127.0.0.1:3,1", "-target", "d=127.0.0.1:4,1"}); err == nil {
		t.Error("four targets accepted")
	}
}

func TestParseFlagsQuick(t *testing.T) {
	c, err := parseFlags([]string{"-target", "x=127.0.0.1:1,1", "-quick", "-rate", "7s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.bulk != 2*time.Second || c.rate != 7*time.Second || c.rounds != 1 || c.quiet != 0 {
		t.Fatalf("quick defaults not applied or explicit flag lost: %+v", c)
	}
	for _, bad := range [][]string{
		{},
		{"-target", "x=127.0.0.1:1"},
		{"-target", "x=127.0.0.1:1,1", "-only", "cpu"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestParseFlagsDest(t *testing.T) {
	c, err := parseFlags([]string{"-target", "x=127.0.0.1:1,1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.dest != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("default dest %v, want 127.0.0.1", c.dest)
	}
	t.Setenv("BENCH_DEST", "127.0.0.2")
	if c, err = parseFlags([]string{"-target", "x=127.0.0.1:1,1"}); err != nil || c.dest != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("BENCH_DEST: dest %v, %v", c.dest, err)
	}
	if c, err = parseFlags([]string{"-target", "x=127.0.0.1:1,1", "-dest", "::1"}); err != nil || c.dest != netip.IPv6Loopback() {
		t.Fatalf("-dest over BENCH_DEST: dest %v, %v", c.dest, err)
	}
	for _, bad := range []string{"", "localhost", "0.0.0.0", "::", "fe80::1%eth0", "127.0.0.1:80"} {
		if _, err := parseFlags([]string{"-target", "x=127.0.0.1:1,1", "-dest", bad}); err == nil {
			t.Errorf("-dest %q accepted", bad)
		}
	}
}

// TestServersOnDest checks that the servers listen on the address given and
// that a CONNECT through a proxy reaches them there.
func TestServersOnDest(t *testing.T) {
	ip := netip.MustParseAddr("127.0.0.2") // loopback too on Linux, but not 127.0.0.1
	s, err := startServers(ip, false)
	if err != nil {
		t.Skipf("cannot listen on %v: %v", ip, err)
	}
	defer s.close()
	for _, a := range []netip.AddrPort{s.sink, s.source, s.reqrep, s.hold} {
		if a.Addr().Unmap() != ip {
			t.Fatalf("server on %v, want %v", a, ip)
		}
	}
	p := startMiniProxy(t, 1)
	c, err := dialSOCKS(p.ln.Addr().String(), s.reqrep, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(make([]byte, reqSize)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, replyBytes[:]) {
		t.Fatalf("reply of %d bytes, %v; want the %d-byte reply", len(got), err, replySize)
	}
}
