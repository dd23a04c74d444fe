package probe

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHead(t *testing.T) {
	cases := []struct {
		wire   string
		status int
		close  bool
	}{
		{"HTTP/1.1 204 No Content\r\n\r\n", 204, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, false},
		{"HTTP/1.1 404\r\n\r\n", 404, false},
		{"HTTP/1.1 200 \r\n\r\n", 200, false},
		{"HTTP/1.1 200 OK\n\n", 200, false},
		{"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\n", 200, true},
		{"HTTP/1.1 200 OK\r\nX-A: 1\r\n continued\r\n\r\n", 200, false},
		{"HTTP/1.0 200 OK\r\n\r\n", 200, true},
		{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", 200, false},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 103, false},
		{"HTTP/1.1 200 caf\xc3\xa9\r\nX: v\xff\r\n\r\n", 200, false},
	}
	for _, tc := range cases {
		h, n, err := parseHead([]byte(tc.wire))
		end := strings.Index(tc.wire, "\r\n\r\n") + 4
		if end < 4 {
			end = strings.Index(tc.wire, "\n\n") + 2
		}
		if err != nil || n != end || h.status != tc.status || h.close != tc.close {
			t.Errorf("%q: %+v, %d, %v; want status %d close %v length %d", tc.wire, h, n, err, tc.status, tc.close, end)
		}
		// Every proper prefix is incomplete, not wrong.
		for i := range end {
			if _, n, err := parseHead([]byte(tc.wire[:i])); n != 0 || err != nil {
				t.Errorf("%q cut at %d: %d, %v", tc.wire, i, n, err)
				break
			}
		}
	}
}

func TestParseHeadRejects(t *testing.T) {
	for _, wire := range []string{
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"http/1.1 200 OK\r\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\rX: y\r\n\r\n",
		"HTTP/1.1 200 O\x00K\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
		"HTTP/1.1 200 OK\r\nName : space\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNa(me: v\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
		"HTTP/1.1 200 OK\r\n folded first\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: 1\r\n \x7f\r\n\r\n",
	} {
		if _, n, err := parseHead([]byte(wire)); !errors.Is(err, ErrBadHead) {
			t.Errorf("%q: %d, %v; want ErrBadHead", wire, n, err)
		}
	}
	// A line that cannot begin a status line fails before it ends.
	if _, _, err := parseHead([]byte("SSH-2.0-x")); !errors.Is(err, ErrBadHead) {
		t.Errorf("a non-HTTP greeting: %v", err)
	}
}
