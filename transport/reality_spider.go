package transport

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
)

// spiderBody bounds what the spider reads of the target site's page.
const spiderBody = 256 << 10

// spiderWait bounds the spider when the dial has no deadline of its own.
const spiderWait = 5 * time.Second

// spider browses the target site over uc, a connection whose handshake the
// site itself answered, so that it ends as a browser's visit would rather
// than cut right after the handshake: one GET of spider_x with a
// browser's headers and a padding cookie, its page read up to spiderBody,
// all within ctx. Its outcome changes nothing: the dial fails either way.
func (r *realityClient) spider(ctx context.Context, uc *utls.UConn) {
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > spiderWait {
		deadline = time.Now().Add(spiderWait)
	}
	uc.SetDeadline(deadline)
	defer uc.SetDeadline(time.Time{})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.name+r.spiderX, nil)
	if err != nil {
		return
	}
	req.Header.Set("User-Agent", DefaultUserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Language", "en-US,en;q=0.9")
	req.AddCookie(&http.Cookie{Name: "padding", Value: strings.Repeat("0", 30+rand.IntN(32))})
	var resp *http.Response
	if uc.ConnectionState().NegotiatedProtocol == "h2" {
		// net/http runs HTTP/2 only on its own *tls.Conn, not on a uTLS
		// conn: the x/net client takes any conn.
		//lint:ignore SA1019 net/http's ClientConn cannot take a uTLS conn
		cc, err := (&http2.Transport{}).NewClientConn(uc)
		if err != nil {
			return
		}
		defer cc.Close()
		if resp, err = cc.RoundTrip(req); err != nil {
			return
		}
	} else {
		req.Header.Set("Connection", "close")
		if err := req.Write(uc); err != nil {
			return
		}
		if resp, err = http.ReadResponse(bufio.NewReader(uc), req); err != nil {
			return
		}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, spiderBody))
	resp.Body.Close()
}
