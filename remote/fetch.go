package remote

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Defaults of a Fetcher.
const (
	DefaultTimeout       = 60 * time.Second
	DefaultHeaderTimeout = 20 * time.Second
	ProgressAfter        = 3 * time.Second
	ProgressEvery        = 3 * time.Second
)

// CompatVersion is the mihomo release whose subscription formats the
// provider reader takes: the User-Agent says it, since subscription
// servers decide by it which proxy types they may answer with.
const CompatVersion = "v1.19.0"

// UserAgent is the User-Agent of the downloads of switchyard version v:
// mihomo's ("clash.meta/..."), then switchyard's own.
func UserAgent(v string) string {
	return "clash.meta/" + CompatVersion + " mihomo/" + CompatVersion + " switchyard/" + v
}

// Sentinels of a failed Fetch.
var (
	// ErrTooLarge: the body is over the resource's size limit.
	ErrTooLarge = errors.New("the download is over the size limit")
	// ErrInvalid: the content failed Validate; the cached copy stays.
	ErrInvalid = errors.New("the download does not load")
	// ErrStatus: the server answered with a status other than 200 or 304.
	ErrStatus = errors.New("the server refused the download")
)

// DialFunc opens a connection of a download through via (an outbound or
// group tag).
type DialFunc func(ctx context.Context, via, network, addr string) (net.Conn, error)

// Fetcher downloads resources into their caches.
type Fetcher struct {
	// Dial opens every connection; required.
	Dial DialFunc
	// UserAgent is sent with every request; "" is UserAgent("dev").
	UserAgent string
	// TLS, when set, is the TLS configuration of https downloads (tests
	// give their own roots); nil verifies with the system's.
	TLS *tls.Config
	// Timeout bounds a whole download, HeaderTimeout the wait for the
	// response header; 0 is the default.
	Timeout, HeaderTimeout time.Duration
	// ProgressAfter and ProgressEvery time the progress lines; 0 is the
	// default.
	ProgressAfter, ProgressEvery time.Duration
	Log                          *slog.Logger
}

// Outcome is what a successful Fetch did.
type Outcome struct {
	// Changed: the cache holds new content (OnChange is due).
	Changed bool
	// NotModified: the server answered 304.
	NotModified bool
	Meta        Meta
}

func (f *Fetcher) log() *slog.Logger {
	if f.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Log
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Fetch downloads r once: see the package doc. A failure leaves the
// cached copy as it was.
func (f *Fetcher) Fetch(ctx context.Context, r Resource) (Outcome, error) {
	timeout := orDefault(f.Timeout, DefaultTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	meta, cached := ReadMeta(r.CachePath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", Redact(r.URL), unwrapURL(err))
	}
	ua := f.UserAgent
	if ua == "" {
		ua = UserAgent("dev")
	}
	req.Header.Set("User-Agent", ua)
	conditional := cached && meta.URL == r.URL && meta.SHA256 != ""
	if conditional {
		if meta.ETag != "" {
			req.Header.Set("If-None-Match", meta.ETag)
		}
		if meta.LastModified != "" {
			req.Header.Set("If-Modified-Since", meta.LastModified)
		}
	}
	tr := &http.Transport{
		Proxy: nil, // every connection goes through Dial
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return f.Dial(ctx, r.Via, network, addr)
		},
		TLSClientConfig:       f.TLS,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   orDefault(f.HeaderTimeout, DefaultHeaderTimeout),
		ResponseHeaderTimeout: orDefault(f.HeaderTimeout, DefaultHeaderTimeout),
		DisableKeepAlives:     true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{}, f.failed(ctx, r, timeout, err)
	}
	defer resp.Body.Close()
	now := time.Now()
	info, hasInfo := ParseUserInfo(resp.Header.Get("Subscription-Userinfo"))
	switch {
	case resp.StatusCode == http.StatusNotModified && cached:
		meta.FetchedAt = now
		if hasInfo {
			meta.UserInfo = &info
		}
		if err := writeMeta(r.CachePath, meta); err != nil {
			f.log().Warn("the download's meta is not kept", "resource", r.name(), "error", err)
		}
		return Outcome{NotModified: true, Meta: meta}, nil
	case resp.StatusCode != http.StatusOK:
		return Outcome{}, fmt.Errorf("%s: %w: %s", Redact(r.URL), ErrStatus, resp.Status)
	}
	limit := r.maxSize()
	if resp.ContentLength > limit {
		return Outcome{}, fmt.Errorf("%s: %w: %d bytes, over the %s limit", Redact(r.URL), ErrTooLarge, resp.ContentLength, mib(limit))
	}
	body, err := f.readBody(ctx, r, resp, limit)
	if err != nil {
		return Outcome{}, f.failed(ctx, r, timeout, err)
	}
	sum := sha256.Sum256(body)
	next := Meta{
		URL: r.URL, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"),
		FetchedAt: now, UpdatedAt: now, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body)),
	}
	if hasInfo {
		next.UserInfo = &info
	}
	if cached && meta.SHA256 == next.SHA256 {
		next.UpdatedAt, next.Entries = meta.UpdatedAt, meta.Entries
		if err := writeMeta(r.CachePath, next); err != nil {
			f.log().Warn("the download's meta is not kept", "resource", r.name(), "error", err)
		}
		return Outcome{Meta: next}, nil
	}
	if r.Validate != nil {
		n, err := r.Validate(body)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: %v; the cached copy stays", ErrInvalid, err)
		}
		next.Entries = n
	}
	if err := writeFile(r.CachePath, body); err != nil {
		return Outcome{}, err
	}
	if err := writeMeta(r.CachePath, next); err != nil {
		f.log().Warn("the download's meta is not kept", "resource", r.name(), "error", err)
	}
	return Outcome{Changed: true, Meta: next}, nil
}

// failed words a request or body error: the deadline is named as such,
// and the URL is written without its query (subscription tokens).
func (f *Fetcher) failed(ctx context.Context, r Resource, timeout time.Duration, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return fmt.Errorf("%s: %w", Redact(r.URL), err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no complete answer within %s: %w", Redact(r.URL), timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", Redact(r.URL), unwrapURL(err))
}

// readBody reads the body up to limit, logging progress while it takes
// longer than ProgressAfter.
func (f *Fetcher) readBody(ctx context.Context, r Resource, resp *http.Response, limit int64) ([]byte, error) {
	var n atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // owned by readBody: ended by stop, waited for below
		defer close(done)
		f.progress(r, resp.ContentLength, &n, stop)
	}()
	defer func() {
		close(stop)
		<-done
	}()
	var buf []byte
	if resp.ContentLength > 0 {
		buf = make([]byte, 0, resp.ContentLength)
	}
	chunk := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(chunk)
		if int64(len(buf))+int64(k) > limit {
			return nil, fmt.Errorf("%w: more than the %s limit", ErrTooLarge, mib(limit))
		}
		buf = append(buf, chunk[:k]...)
		n.Store(int64(len(buf)))
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// progress logs "downloading provider sub: 1.2 MiB of 3.4 MiB" every
// ProgressEvery once ProgressAfter has passed, until stop.
func (f *Fetcher) progress(r Resource, length int64, n *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTimer(orDefault(f.ProgressAfter, ProgressAfter))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		got := mibValue(n.Load())
		if length > 0 {
			f.log().Info(fmt.Sprintf("downloading %s: %s of %s", r.name(), got, mibValue(length)))
		} else {
			f.log().Info(fmt.Sprintf("downloading %s: %s", r.name(), got))
		}
		t.Reset(orDefault(f.ProgressEvery, ProgressEvery))
	}
}

// mib writes a limit: "32 MiB".
func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// mibValue writes a size with one decimal: "1.2 MiB".
func mibValue(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Redact writes a URL for logs and errors: no user info, and no query or
// fragment (subscription URLs carry their token there).
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	out := u.Scheme + "://" + u.Host + u.EscapedPath()
	if u.RawQuery != "" || u.Fragment != "" {
		out += "?…"
	}
	return out
}

// unwrapURL drops the *url.Error around a client error: it repeats the
// URL, query and all.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
