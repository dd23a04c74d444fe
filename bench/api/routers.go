package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"switchyard/internal/vlessecho"
	"sync"
	"syscall"
	"time"

	"switchyard/test/socksclient"
)

// router is one router under test, running: its SOCKS5 inbound, its
// Clash API and its pprof listener (switchyard's SWITCHYARD_PPROF,
// sing-box's experimental.debug).
type router struct {
	name             string
	socks, api, prof string // host:port
	cmd              *exec.Cmd
	done             chan struct{}
	log              string
}

func (r *router) pid() int { return r.cmd.Process.Pid }

func writeSwitchyard(path string, socks, api int, up *net.TCPAddr) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`[log]
level = "warn"

[api]
listen = "127.0.0.1:%d"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:%d"

[[outbounds]]
tag = "far"
type = "vless"
server = "%s"
uuid = "%s"
transport = { type = "grpc", service_name = "load" }

[route]
final = "far"
`, api, socks, up, vlessecho.UUID)), 0o644)
}

func writeSingbox(path string, socks, api, prof int, up *net.TCPAddr) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`{
  "log": {"level": "warn"},
  "inbounds": [{"type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": %d}],
  "outbounds": [{"type": "vless", "tag": "far", "server": "127.0.0.1", "server_port": %d, "uuid": "%s",
    "transport": {"type": "grpc", "service_name": "load"}}],
  "route": {"final": "far"},
  "experimental": {
    "clash_api": {"external_controller": "127.0.0.1:%d"},
    "debug": {"listen": "127.0.0.1:%d"}
  }
}
`, socks, up.Port, vlessecho.UUID, api, prof)), 0o644)
}

// startRouter writes name's config into dir and runs it with no
// environment but PATH and HOME (and switchyard's pprof address), waiting
// until its inbound and its API answer.
func startRouter(name, bin, dir string, up *net.TCPAddr) (*router, error) {
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	r := &router{name: name, socks: loopback(ports[0]), api: loopback(ports[1]), prof: loopback(ports[2]),
		done: make(chan struct{}), log: filepath.Join(dir, name+".log")}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	switch name {
	case "switchyard":
		cfg := filepath.Join(dir, "switchyard.toml")
		if err := writeSwitchyard(cfg, ports[0], ports[1], up); err != nil {
			return nil, err
		}
		r.cmd = exec.Command(bin, "run", "-c", cfg)
		env = append(env, "SWITCHYARD_PPROF="+r.prof)
	case "sing-box":
		cfg := filepath.Join(dir, "sing-box.json")
		if err := writeSingbox(cfg, ports[0], ports[1], ports[2], up); err != nil {
			return nil, err
		}
		r.cmd = exec.Command(bin, "run", "-c", cfg)
	default:
		return nil, fmt.Errorf("unknown router %q", name)
	}
	f, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = env, f, f
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	for _, a := range []string{r.socks, r.api, r.prof} {
		if err := r.waitListening(a, 20*time.Second); err != nil {
			r.stop()
			return nil, err
		}
	}
	return r, nil
}

func (r *router) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *router) waitListening(addr string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		if !r.alive() {
			return fmt.Errorf("%s exited (log: %s)", r.name, r.log)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s does not listen on %s (log: %s)", r.name, addr, r.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop asks the router to exit and kills it after 10 s.
func (r *router) stop() {
	if !r.alive() {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// openFlows opens n flows through r's SOCKS5 inbound, each to dest and
// answered once (a 4-byte echo), so that every one is established end to
// end in both routers (sing-box sends a VLESS header only with the first
// payload).
func openFlows(r *router, dest string, n, workers int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				c, err := socksclient.DialWithin(r.socks, dest, "", "", 20*time.Second)
				if err == nil {
					err = ping(c)
				}
				if err != nil {
					if c != nil {
						c.Close()
					}
					mu.Lock()
					fail = errors.Join(fail, fmt.Errorf("flow %d: %w", i, err))
					mu.Unlock()
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	if fail != nil {
		closeAll(conns)
		return nil, fail
	}
	return conns, nil
}

// ping sends 4 bytes on c and reads their echo.
func ping(c net.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := io.ReadFull(c, make([]byte, 4))
	return err
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// get GETs url and returns the body.
func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

// freePort returns a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
