package shadowsocks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	ss "switchyard/protocol/shadowsocks"
)

// aeadServer is a minimal aes-128-gcm Shadowsocks TCP server for tests,
// written from SIP004 with the standard library: it reads the request,
// reports the target address bytes, and echoes the upload until the client
// half-closes, then half-closes its own side.
type aeadServer struct {
	ln      net.Listener
	key     []byte
	targets chan []byte // the address bytes of each request
	wg      sync.WaitGroup
}

func startAEADServer(t *testing.T, password string) *aeadServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &aeadServer{ln: ln, key: ss.EVPBytesToKey(password, 16), targets: make(chan []byte, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); defer c.Close(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *aeadServer) gcm(salt []byte) cipher.AEAD {
	sub, _ := hkdf.Key(sha1.New, s.key, salt, "ss-subkey", 16)
	b, _ := aes.NewCipher(sub)
	g, _ := cipher.NewGCM(b)
	return g
}

type counterNonce [12]byte

func (n *counterNonce) next() []byte {
	out := append([]byte(nil), n[:]...)
	for i := range n {
		n[i]++
		if n[i] != 0 {
			break
		}
	}
	return out
}

func (s *aeadServer) serve(c net.Conn) {
	salt := make([]byte, 16)
	if _, err := io.ReadFull(c, salt); err != nil {
		return
	}
	open, nonce := s.gcm(salt), new(counterNonce)
	chunk := func() ([]byte, error) {
		l := make([]byte, 18)
		if _, err := io.ReadFull(c, l); err != nil {
			return nil, err
		}
		l, err := open.Open(nil, nonce.next(), l, nil)
		if err != nil {
			return nil, err
		}
		p := make([]byte, int(binary.BigEndian.Uint16(l))+16)
		if _, err := io.ReadFull(c, p); err != nil {
			return nil, err
		}
		return open.Open(nil, nonce.next(), p, nil)
	}
	addr, err := chunk()
	if err != nil {
		return
	}
	s.targets <- addr
	out := make([]byte, 16)
	rand.Read(out)
	c.Write(out)
	seal, wnonce := s.gcm(out), new(counterNonce)
	for {
		p, err := chunk()
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.(*net.TCPConn).CloseWrite()
			}
			return
		}
		var l [2]byte
		binary.BigEndian.PutUint16(l[:], uint16(len(p)))
		frame := seal.Seal(nil, wnonce.next(), l[:], nil)
		frame = seal.Seal(frame, wnonce.next(), p, nil)
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
}

// udpEchoServer answers every AEAD datagram with the same address and
// payload prefixed with "re:". The AEAD packet format is the same both ways,
// so a PacketClient of the same cipher serves as the server's codec.
func udpEchoServer(t *testing.T, method, password string) *net.UDPConn {
	t.Helper()
	c, err := ss.New(method, password)
	if err != nil {
		t.Fatal(err)
	}
	codec, _ := c.NewPacketClient()
	sock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		out := make([]byte, 65535)
		for {
			n, from, err := sock.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			to, payload, err := codec.Open(buf[:n])
			if err != nil {
				continue
			}
			pkt, _ := codec.Seal(out, to, append([]byte("re:"), payload...))
			sock.WriteToUDPAddrPort(pkt, from)
		}
	}()
	t.Cleanup(func() { sock.Close(); <-done })
	return sock
}
