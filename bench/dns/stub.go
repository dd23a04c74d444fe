package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mdns "github.com/miekg/dns"
)

// runStub is `dnsbench stub`: a DNS server on loopback UDP that answers an
// A question for any name (addressOf the name, TTL 3600) and counts the
// queries it receives, until SIGINT or SIGTERM.
func runStub(args []string) error {
	fs := flag.NewFlagSet("dnsbench stub", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "UDP address to listen on")
	addrFile := fs.String("addr-file", "", "write the address listened on to this file once listening")
	readers := fs.Int("readers", 2, "goroutines reading the socket")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(*listen)
	if err != nil {
		return err
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return err
	}
	defer pc.Close()
	addr := pc.LocalAddr().String()
	if *addrFile != "" {
		// Written whole, then renamed: a reader sees all of it or nothing.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, "dnsbench stub: listening on", addr)

	var queries atomic.Uint64
	count := func() uint64 { return queries.Load() }
	var wg sync.WaitGroup
	for range max(*readers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]byte, 2048)
			out := make([]byte, 0, 2048)
			for {
				n, from, err := pc.ReadFromUDPAddrPort(in)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					continue
				}
				queries.Add(1)
				out = stubAnswer(out[:0], in[:n], count)
				if len(out) > 0 {
					pc.WriteToUDPAddrPort(out, from)
				}
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	pc.Close()
	wg.Wait()
	fmt.Fprintln(os.Stderr, "dnsbench stub: queries received:", queries.Load())
	return nil
}

// stubCount asks the stub at addr how many queries it has received (the
// count includes this query).
func stubCount(addr string) (uint64, error) {
	m := new(mdns.Msg)
	m.SetQuestion("queries.stub.", mdns.TypeTXT)
	m.Question[0].Qclass = mdns.ClassCHAOS
	c := &mdns.Client{Net: "udp", Timeout: 2 * time.Second}
	var lastErr error
	for range 3 {
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			lastErr = err
			continue
		}
		for _, rr := range r.Answer {
			if t, ok := rr.(*mdns.TXT); ok && len(t.Txt) == 1 {
				return strconv.ParseUint(t.Txt[0], 10, 64)
			}
		}
		return 0, errors.New("stub: no count in the answer")
	}
	return 0, lastErr
}
