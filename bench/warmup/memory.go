package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"switchyard/bench/internal/benchkit"
	"switchyard/test/netem/netlab"
)

// reading is what switchyard held at one moment of the memory phase.
type reading struct {
	at      time.Duration // after switchyard was ready
	rssKiB  int64
	fds     int
	sockets int
}

// memory runs switchyard with the memory phase's nodes twice, warm-up at
// its defaults ("on") and off, and reads VmRSS and the descriptors at each
// -mem-at offset. A build without warm-up has only "off".
func (l *lab) memory() (map[string][]reading, error) {
	out := map[string][]reading{}
	modes := []string{"off"}
	if l.warmInBuild {
		modes = []string{"on", "off"}
	}
	for _, mode := range modes {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		socks := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		path := filepath.Join(l.c.work, "nodes-"+mode+".toml")
		if err := os.WriteFile(path, []byte(l.switchyardNodes(socks, mode == "on")), 0o600); err != nil {
			return nil, err
		}
		p, err := startCmd("switchyard "+mode, filepath.Join(l.c.work, "nodes-"+mode+".log"), exec.Command(l.c.switchyard, "run", "-c", path))
		if err != nil {
			return nil, err
		}
		if err := p.waitListening(socks, 20*time.Second); err != nil {
			p.stop()
			return nil, err
		}
		ready := time.Now()
		pid := p.cmd.Process.Pid
		for _, at := range l.c.memAt {
			time.Sleep(time.Until(ready.Add(at)))
			rss, err := benchkit.ProcStatusKiB(pid, "VmRSS:")
			if err != nil {
				p.stop()
				return nil, err
			}
			fds, sockets := descriptors(pid)
			out[mode] = append(out[mode], reading{at: at, rssKiB: rss, fds: fds, sockets: sockets})
		}
		p.stop()
	}
	return out, nil
}

// switchyardNodes is the memory phase's switchyard: nodes nodes, VLESS and
// Trojan alternately, each with an account of its own on the server (so
// each is a node identity of its own), all in one Selector and one
// URLTest; warm-up at its defaults (the table left out) or off.
func (l *lab) switchyardNodes(socks string, warm bool) string {
	var b strings.Builder
	b.WriteString(quietHealth)
	if !warm {
		b.WriteString(l.warmupTable(false))
	}
	fmt.Fprintf(&b, "\n[[inbounds]]\ntag = \"socks-in\"\ntype = \"socks\"\nlisten = %q\n", socks)
	var tags []string
	for i := range l.c.nodes {
		uuid, password := netlab.Account(i)
		tag := fmt.Sprintf("node-%02d", i)
		tags = append(tags, strconv.Quote(tag))
		if i%2 == 0 {
			fmt.Fprintf(&b, "\n[[outbounds]]\ntag = %q\ntype = \"vless\"\nserver = %q\nuuid = %q\n%s\n", tag, l.serverAddr, uuid, l.tlsKey())
		} else {
			fmt.Fprintf(&b, "\n[[outbounds]]\ntag = %q\ntype = \"trojan\"\nserver = %q\npassword = %q\n%s\n", tag, l.trojanServer, password, l.tlsKey())
		}
	}
	members := strings.Join(tags, ", ")
	fmt.Fprintf(&b, "\n[[groups]]\ntag = \"pick\"\npolicy = \"selector\"\nmembers = [%s]\n", members)
	fmt.Fprintf(&b, "\n[[groups]]\ntag = \"auto\"\npolicy = \"urltest\"\nmembers = [%s]\n", members)
	b.WriteString("\n[route]\nfinal = \"pick\"\n")
	return b.String()
}

// descriptors counts the process's open descriptors and, of them, the
// sockets.
func descriptors(pid int) (fds, sockets int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		fds++
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	return fds, sockets
}
