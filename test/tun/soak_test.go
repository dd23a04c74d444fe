package tun_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goroutines reads switchyard's go_goroutines from its metrics, asked from
// the client's namespace.
func (l *lab) goroutines(t *testing.T, api string) int {
	t.Helper()
	var n int
	err := in(l.client, func() error {
		c, err := net.DialTimeout("tcp", api, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest("GET", "http://"+api+"/metrics", nil)
		req.Close = true
		if err := req.Write(c); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
				n, err = strconv.Atoi(v)
				return err
			}
		}
		return fmt.Errorf("no go_goroutines in /metrics (%s)", resp.Status)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// 2,000 TCP connections and 10,000 UDP datagrams through the TUN: the
// process's goroutines go back to their level once the flows and the
// associations (udp_timeout) have ended.
func TestSoakThroughTheTUN(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	l := newLab(t)
	l.tcpEcho(t, l.web+":9000")
	l.udpEcho(t, l.web+":7001")
	l.dnsServer(t, l.web+":53", "web.test", l.web)
	const api = "127.0.0.1:9090"
	conf := strings.Replace(l.config("udp_timeout = \"2s\"\n"), "[dns]", "[api]\nlisten = \""+api+"\"\n\n[dns]", 1)
	sw := l.start(t, filepath.Join(t.TempDir(), "sy.toml"), conf)
	time.Sleep(time.Second)
	base := l.goroutines(t, api)

	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in(l.client, func() error {
				for range 50 {
					c, err := net.DialTimeout("tcp", l.web+":9000", 10*time.Second)
					if err != nil {
						failed.Add(1)
						continue
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					c.Write([]byte("soak"))
					buf := make([]byte, 4)
					if _, err := c.Read(buf); err != nil {
						failed.Add(1)
					}
					c.Close()
				}
				return nil
			})
		}()
	}
	var echoed atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in(l.client, func() error {
				c, err := net.ListenPacket("udp4", "0.0.0.0:0")
				if err != nil {
					failed.Add(1)
					return nil
				}
				defer c.Close()
				to, _ := net.ResolveUDPAddr("udp", l.web+":7001")
				buf := make([]byte, 512)
				for range 500 {
					c.WriteTo([]byte("x"), to)
					c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
					if _, _, err := c.ReadFrom(buf); err == nil {
						echoed.Add(1)
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 2,000 TCP connections failed\n%s", n, sw.Logs)
	}
	if n := echoed.Load(); n < 9000 {
		t.Fatalf("%d of 10,000 datagrams echoed", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := l.goroutines(t, api)
		if g <= base+10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the soak switchyard runs %d goroutines, %d before", g, base)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
