package probe

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"time"
)

// MaxHead bounds the response heads of one request: over HTTP/1, every
// byte from the first of the response to the end of the final head's empty
// line, informational (1xx) heads included; over HTTP/2, the header lists
// of the request's HEADERS, counted as HTTP/2 counts them (name, value and
// 32 per field).
const MaxHead = 16 << 10

// The probe's failures of a response, matched with errors.Is.
var (
	ErrHeadTooLarge = errors.New("response head larger than 16 KiB")
	ErrBadHead      = errors.New("malformed response head")
	// ErrSwitch is a 101 Switching Protocols answer: a probe has no other
	// protocol to switch to.
	ErrSwitch = errors.New("unsupported protocol switch (101)")
)

// StatusError is a final response whose status is outside 200–499.
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP status %d outside 200–499", e.Code)
}

// checkStatus accepts a final status from 200 to 499.
func checkStatus(code int) error {
	if code < 200 || code > 499 {
		return &StatusError{Code: code}
	}
	return nil
}

// head is what the probe needs of one HTTP/1 response head.
type head struct {
	status int
	close  bool // the server closes the connection after this response
}

func badHead(why string) error { return fmt.Errorf("%w: %s", ErrBadHead, why) }

// parseHead reads one response head at the start of b. When b holds a whole
// head it returns the head and its length, up to and including the line
// feed of its empty line. When b holds only part of a valid head it returns
// n == 0 and no error. Lines end in CRLF or a bare LF; a bare CR, a control
// character, a malformed status line or header field, and whitespace
// before the first field are errors. Obsolete line folding after a field is
// accepted as part of that field.
func parseHead(b []byte) (h head, n int, err error) {
	keepAlive := false
	http10 := false
	for line := 0; ; line++ {
		j := bytes.IndexByte(b[n:], '\n')
		if j < 0 {
			if line == 0 && !statusPrefix(b) {
				return head{}, 0, badHead(fmt.Sprintf("status line %.32q", b))
			}
			return head{}, 0, nil
		}
		l := b[n : n+j]
		n += j + 1
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if bytes.IndexByte(l, '\r') >= 0 {
			return head{}, 0, badHead("bare CR in a line")
		}
		switch {
		case line == 0:
			if h.status, http10, err = parseStatusLine(l); err != nil {
				return head{}, 0, err
			}
		case len(l) == 0:
			if http10 && !keepAlive {
				h.close = true
			}
			return h, n, nil
		case l[0] == ' ' || l[0] == '\t':
			if line == 1 {
				return head{}, 0, badHead("whitespace before the first header field")
			}
			if !validValue(l) {
				return head{}, 0, badHead("control character in a folded header field")
			}
		default:
			name, value, err := parseField(l)
			if err != nil {
				return head{}, 0, err
			}
			if asciiEqualFold(name, "connection") {
				for tok := range bytes.SplitSeq(value, []byte{','}) {
					tok = bytes.Trim(tok, " \t")
					switch {
					case asciiEqualFold(tok, "close"):
						h.close = true
					case asciiEqualFold(tok, "keep-alive"):
						keepAlive = true
					}
				}
			}
		}
	}
}

// statusPrefix reports whether b, part of a status line, may still become a
// valid one: it checks the version, the only part that can be judged early.
func statusPrefix(b []byte) bool {
	const v = "HTTP/1."
	if len(b) <= len(v) {
		return bytes.HasPrefix([]byte(v), b)
	}
	return bytes.HasPrefix(b, []byte(v)) && (len(b) == len(v) || isDigit(b[len(v)]))
}

// parseStatusLine reads "HTTP/1.x NNN[ reason]".
func parseStatusLine(l []byte) (status int, http10 bool, err error) {
	if len(l) < 12 || !bytes.HasPrefix(l, []byte("HTTP/1.")) || !isDigit(l[7]) || l[8] != ' ' ||
		!isDigit(l[9]) || !isDigit(l[10]) || !isDigit(l[11]) || (len(l) > 12 && l[12] != ' ') {
		return 0, false, badHead(fmt.Sprintf("status line %.32q", l))
	}
	if !validValue(l[12:]) {
		return 0, false, badHead("control character in the status line")
	}
	status = int(l[9]-'0')*100 + int(l[10]-'0')*10 + int(l[11]-'0')
	if status < 100 {
		return 0, false, badHead(fmt.Sprintf("status %03d", status))
	}
	return status, l[7] == '0', nil
}

// parseField splits "name: value", checking the name is a token right
// before the colon and the value holds no control character but tab.
func parseField(l []byte) (name, value []byte, err error) {
	i := bytes.IndexByte(l, ':')
	if i <= 0 {
		return nil, nil, badHead(fmt.Sprintf("header field %.32q", l))
	}
	name, value = l[:i], l[i+1:]
	for _, c := range name {
		if !isTokenChar(c) {
			return nil, nil, badHead(fmt.Sprintf("header field name %.32q", name))
		}
	}
	if !validValue(value) {
		return nil, nil, badHead(fmt.Sprintf("control character in header field %.32q", name))
	}
	return name, bytes.Trim(value, " \t"), nil
}

func validValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', isDigit(c):
		return true
	}
	return c != 0 && bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// h1 is the HTTP/1.1 side of one probe connection.
type h1 struct {
	c   net.Conn
	req []byte
	// buf holds the bytes read and not yet consumed by a head; a round's
	// heads must end within it, which is the MaxHead bound.
	buf [MaxHead]byte
	n   int
}

// round sends method and reads the response heads up to the final one. It
// returns the time from the request's write to the end of the final head.
// got reports whether any byte of the response had arrived when it failed.
func (h *h1) round(t *target, method string) (rtt time.Duration, fin head, got bool, err error) {
	h.req = appendRequest(h.req[:0], t, method)
	got = h.n > 0 // bytes left from the last round belong to this one
	start := time.Now()
	if _, err := h.c.Write(h.req); err != nil {
		return 0, head{}, got, err
	}
	off := 0 // start of the head being read
	var readErr error
	for {
		if h.n > off {
			hd, n, err := parseHead(h.buf[off:h.n])
			if err != nil {
				return 0, head{}, true, err
			}
			if n > 0 {
				off += n
				switch {
				case hd.status == 101:
					return 0, head{}, true, ErrSwitch
				case hd.status < 200:
					continue // informational: the final head follows
				}
				rtt = time.Since(start)
				h.n = copy(h.buf[:], h.buf[off:h.n])
				return rtt, hd, true, checkStatus(hd.status)
			}
		}
		if readErr != nil {
			return 0, head{}, got, readErr
		}
		if h.n == len(h.buf) {
			return 0, head{}, true, ErrHeadTooLarge
		}
		m, err := h.c.Read(h.buf[h.n:])
		h.n += m
		if m > 0 {
			got = true
		}
		readErr = err
	}
}
