// Command dnsbench measures the DNS service of two routers side by side:
// queries answered per second through a SOCKS5 UDP association, with a
// warm cache and with a cold one against a local stub upstream.
//
// Usage:
//
//	dnsbench stub [-listen 127.0.0.1:0] [-addr-file F]
//	dnsbench load -stub ADDR[,PID] -target NAME=ADDR,PID -target NAME=ADDR,PID [flags]
//
// The stub answers an A question for any name with an address in
// 192.0.2.0/24 taken from a hash of the name (TTL 3600), and tells how
// many queries it has received when asked TXT queries.stub. in class CH.
//
// load opens -assoc associations to each target and keeps -inflight
// queries in flight on each, all sent to 1.1.1.1:53, which every target
// is to answer in-process. It counts the answers that arrive within the
// measured window, the queries that get none within -timeout, and the
// answers that do not answer their query (another address than the stub
// gives, an error code, another question). "warm" asks 100 names in turn
// after one pass over them; "cold" asks a name never asked before every
// time, so every query goes to the stub. The first target is the subject
// and the second the baseline; ratios are subject/baseline. Every flag
// has an environment default (BENCH_*), see -help.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "stub":
		err = runStub(os.Args[2:])
	case "load":
		err = runLoad(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dnsbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: dnsbench stub [flags] | dnsbench load [flags] (-help for each)")
	os.Exit(2)
}
