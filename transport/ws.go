package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"switchyard/netx"

	"switchyard/spec"
)

// DefaultEarlyDataHeader carries WebSocket early data, as Xray and sing-box
// expect it.
const DefaultEarlyDataHeader = "Sec-WebSocket-Protocol"

// wsGUID is the key suffix of RFC 6455's Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsConfig is the WebSocket transport of one outbound.
type wsConfig struct {
	head httpHead
	// maxEarly > 0: up to this many bytes of the first Write ride,
	// base64url without padding, in earlyHeader of the handshake.
	maxEarly    int
	earlyHeader string
}

// newWSConfig applies the defaults (path "/", host from tls.server_name or
// the server, early data header Sec-WebSocket-Protocol) and takes Xray's
// "?ed=N" path form as max_early_data when that is not set.
func newWSConfig(t spec.Transport, host string) (*wsConfig, error) {
	if t.MaxEarlyData < 0 {
		return nil, fmt.Errorf("ws max_early_data %d is negative", t.MaxEarlyData)
	}
	path, ed, err := splitEarlyPath(t.Path)
	if err != nil {
		return nil, err
	}
	w := &wsConfig{maxEarly: t.MaxEarlyData, earlyHeader: t.EarlyDataHeader}
	if w.maxEarly == 0 {
		w.maxEarly = ed
	}
	if w.earlyHeader == "" {
		w.earlyHeader = DefaultEarlyDataHeader
	}
	if !token(w.earlyHeader) {
		return nil, fmt.Errorf("ws early_data_header %q is not an HTTP token", w.earlyHeader)
	}
	if w.maxEarly > 0 {
		for name := range t.Headers {
			if strings.EqualFold(name, w.earlyHeader) {
				return nil, fmt.Errorf("ws header %q carries the early data", name)
			}
		}
	}
	if w.head, err = newHTTPHead("ws", t, path, host); err != nil {
		return nil, err
	}
	return w, nil
}

// splitEarlyPath takes an "ed" query parameter out of a ws path (Xray's
// way of writing max_early_data) and returns the path without it.
func splitEarlyPath(path string) (string, int, error) {
	i := strings.IndexByte(path, '?')
	if i < 0 {
		return path, 0, nil
	}
	q, err := url.ParseQuery(path[i+1:])
	if err != nil || !q.Has("ed") {
		return path, 0, nil
	}
	ed, err := strconv.Atoi(q.Get("ed"))
	if err != nil || ed < 0 {
		return "", 0, fmt.Errorf("ws path %q: ed=%q is not a byte count", path, q.Get("ed"))
	}
	q.Del("ed")
	path = path[:i]
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path, ed, nil
}

// open upgrades c at once, or, with early data, returns a conn whose first
// Write carries the upgrade.
func (w *wsConfig) open(ctx context.Context, c net.Conn) (net.Conn, error) {
	if w.maxEarly > 0 {
		return newEarlyConn(c, w), nil
	}
	var ws *wsConn
	netx.Mark(ctx, netx.PhaseTransport)
	err := netx.Within(ctx, c, func() error {
		var err error
		ws, err = w.handshake(c, nil)
		return err
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return ws, nil
}

// handshake sends the upgrade request, early data in its header when there
// is any, and reads the 101 answer.
func (w *wsConfig) handshake(c net.Conn, early []byte) (*wsConn, error) {
	var raw [16]byte
	rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	req := w.appendRequest(make([]byte, 0, 512+base64.RawURLEncoding.EncodedLen(len(early))), key, early)
	if _, err := c.Write(req); err != nil {
		return nil, fmt.Errorf("ws handshake: %w", err)
	}
	br := bufio.NewReaderSize(c, responseBuf)
	resp, err := readUpgrade(br, "ws")
	if err != nil {
		return nil, err
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != acceptKey(key) {
		return nil, fmt.Errorf("ws handshake: the server's Sec-WebSocket-Accept %q does not answer the key", got)
	}
	return newWSConn(c, br), nil
}

// appendRequest is the whole upgrade request.
func (w *wsConfig) appendRequest(b []byte, key string, early []byte) []byte {
	b = w.head.appendRequest(b)
	b = appendHeader(b, "Sec-WebSocket-Key", key)
	b = append(b, "Sec-WebSocket-Version: 13\r\n"...)
	if len(early) > 0 {
		b = append(b, w.earlyHeader...)
		b = append(b, ": "...)
		b = base64.RawURLEncoding.AppendEncode(b, early)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// acceptKey is the Sec-WebSocket-Accept a server answers key with.
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}
