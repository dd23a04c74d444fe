package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"

	mdns "github.com/miekg/dns"
)

// dohClient asks a DoH server (RFC 8484) with POST requests over one
// HTTP/2 connection that its transport keeps and multiplexes (HTTP/1.1
// when the server offers no h2).
type dohClient struct {
	url string
	tr  *http.Transport
}

// The DoH connection is closed after dohIdleTimeout without a query; a
// connection that stays silent for dohReadIdle is pinged, and closed when
// the ping gets no answer within dohPingTimeout.
const (
	dohIdleTimeout = 60 * time.Second
	dohReadIdle    = 30 * time.Second
	dohPingTimeout = 10 * time.Second
)

const dnsMessageType = "application/dns-message"

func newDoH(c *Client, timeout time.Duration) *dohClient {
	host := c.srv.Host
	if c.srv.Port != DefaultDoHPort {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.srv.Port)))
	} else if ip, ok := c.srv.IP(); ok && ip.Is6() {
		host = "[" + host + "]"
	}
	tr := &http.Transport{
		// Every connection is to the server's own address, resolved
		// like any other server's, through the client's dialer.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			to, err := c.resolve(ctx)
			if err != nil {
				return nil, err
			}
			conn, err := c.dialer.DialContext(ctx, "tcp", to.String())
			if err != nil {
				c.failed(to)
				return nil, err
			}
			return conn, nil
		},
		TLSClientConfig:     c.tls,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: timeout,
		// One connection: concurrent queries wait for it rather than
		// each dialing its own, then share it as HTTP/2 streams.
		MaxConnsPerHost:        1,
		MaxIdleConns:           1,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        dohIdleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 16 << 10,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: dohReadIdle,
			PingTimeout:     dohPingTimeout,
		},
	}
	return &dohClient{url: "https://" + host + c.srv.Path, tr: tr}
}

func (d *dohClient) exchange(ctx context.Context, wire []byte, q mdns.Question) (*mdns.Msg, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(wire))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", dnsMessageType)
	req.Header.Set("Accept", dnsMessageType)
	resp, err := d.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != dnsMessageType {
		return nil, fmt.Errorf("the answer is %q, not %s", resp.Header.Get("Content-Type"), dnsMessageType)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxMessage {
		return nil, errors.New("the answer is longer than a DNS message")
	}
	m, ok := parseAnswer(body, 0, q)
	if !ok {
		return nil, errors.New("the server sent a message that does not answer the query")
	}
	return m, nil
}

func (d *dohClient) close() { d.tr.CloseIdleConnections() }
