package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
)

// closed turns an end of stream inside the response head into
// proxyconn.ErrHandshakeClosed; other errors are returned as they are.
func closed(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return proxyconn.ErrHandshakeClosed
	}
	return err
}

// StatusError is a response to CONNECT whose status is not 2xx.
type StatusError struct {
	Code int
	Line string // the status line as the proxy sent it
}

func (e *StatusError) Error() string { return fmt.Sprintf("http: proxy answered %q", e.Line) }

// Fault is what the status says of the failure (netx.Faulted): 502, 503
// and 504 are the proxy's failure to reach the target (Squid answers 503
// for a refused connect), 403 its refusal of this target, 407 of the
// credentials; any other status is the proxy's.
func (e *StatusError) Fault() (netx.Fault, uint64) {
	switch e.Code {
	case 502, 503, 504:
		return netx.FaultTargetPath, 0
	case 403:
		return netx.FaultTargetRefused, 0
	case 407:
		return netx.FaultProxyAuth, 0
	}
	return netx.FaultProxyProtocol, 0
}

// appendConnect appends the CONNECT request for dst: the request line, Host,
// and the Proxy-Authorization line when auth is set.
func appendConnect(b []byte, dst netx.Addr, auth string) ([]byte, error) {
	if !dst.IsValid() {
		return b, errors.New("http: destination has no host")
	}
	for i := 0; i < len(dst.Name); i++ {
		if c := dst.Name[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '@' {
			return b, fmt.Errorf("http: destination name %q cannot be sent in a request line", dst.Name)
		}
	}
	target := dst.String()
	b = append(b, "CONNECT "...)
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, target...)
	b = append(b, "\r\n"...)
	b = append(b, auth...)
	return append(b, "\r\n"...), nil
}

// headParser finds the end of a response head in a growing buffer and checks
// its status line as soon as that line is whole. Lines end with LF, with or
// without CR before it.
type headParser struct {
	scanned    int  // bytes of whole lines already looked at
	statusSeen bool // the status line was whole and 2xx
}

// parse looks at b, the bytes read so far (a longer b each call, with the
// same start). It returns the length of the head once b holds all of it (0
// until then), or the error of a status line that is malformed or not 2xx.
func (p *headParser) parse(b []byte) (end int, err error) {
	for {
		i := bytes.IndexByte(b[p.scanned:], '\n')
		if i < 0 {
			return 0, nil
		}
		line := b[p.scanned : p.scanned+i]
		p.scanned += i + 1
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !p.statusSeen {
			if err := checkStatus(line); err != nil {
				return 0, err
			}
			p.statusSeen = true
			continue
		}
		if len(line) == 0 {
			return p.scanned, nil
		}
	}
}

// checkStatus accepts "HTTP/1.x 2xx[ reason]".
func checkStatus(line []byte) error {
	const maxShown = 256
	shown := line
	if len(shown) > maxShown {
		shown = shown[:maxShown]
	}
	malformed := len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || !digit(line[7]) || line[8] != ' ' ||
		!digit(line[9]) || !digit(line[10]) || !digit(line[11]) || (len(line) > 12 && line[12] != ' ')
	if malformed {
		return netx.WithFault(fmt.Errorf("http: malformed status line %q", shown), netx.FaultFraming)
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code/100 != 2 {
		return &StatusError{Code: code, Line: string(shown)}
	}
	return nil
}

func digit(c byte) bool { return c >= '0' && c <= '9' }
