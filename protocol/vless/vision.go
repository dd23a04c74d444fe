package vless

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"switchyard/netx"
	"switchyard/protocol/mux"
)

// The Vision flow (xtls-rprx-vision). The request's addons name the flow.
// Each direction then starts in padding: the flow's bytes go in blocks,
//
//	[user UUID, first block of the direction only] command, content length
//	(2 bytes), padding length (2 bytes), content, padding
//
// whose command is Continue (another block follows), End (the padding is
// over: the bytes that follow pass unchanged) or Direct (the padding is
// over, and the bytes that follow go on the TCP connection beneath the
// outer TLS, not inside it). A side sends Direct once the inner traffic is
// TLS 1.3 and a block carries its application data; End otherwise, after a
// few buffers, when the inner traffic is not TLS.

// FlowVision is the Vision flow's name.
const FlowVision = "xtls-rprx-vision"

// Block commands.
const (
	CommandContinue byte = 0x00
	CommandEnd      byte = 0x01
	CommandDirect   byte = 0x02
)

// BlockMax bounds a block: the UUID, the block header, the content and the
// padding fit in 8 KiB, the buffer of Xray's reader.
const BlockMax = 8192

// blockOverhead is the UUID and the block header.
const blockOverhead = 16 + 5

// ContentMax is the most content one block carries.
const ContentMax = BlockMax - blockOverhead

// Padding lengths, as Xray chooses them: a block of less than longBelow
// bytes that hides a header or a handshake is padded to longBase plus up to
// longRand bytes; any other block gets up to shortRand bytes.
const (
	longBelow = 900
	longRand  = 500
	longBase  = 900
	shortRand = 256
)

// AppendRequestFlow appends a request header whose addons name flow (""
// writes none, as AppendRequest does).
func AppendRequestFlow(dst []byte, id *UUID, flow string, cmd byte, to netx.Addr) ([]byte, error) {
	if flow == "" {
		return AppendRequest(dst, id, cmd, to)
	}
	if len(flow) > 0x7f {
		return dst, errors.New("vless: flow name too long")
	}
	start := len(dst)
	dst = append(dst, Version)
	dst = append(dst, id[:]...)
	// The addons: a protobuf message whose field 1 is the flow.
	dst = append(dst, byte(2+len(flow)), 0x0a, byte(len(flow)))
	dst = append(dst, flow...)
	dst = append(dst, cmd)
	switch cmd {
	case CmdMux:
		return dst, nil
	case CmdTCP, CmdUDP:
		out, err := mux.AppendAddr(dst, to)
		if err != nil {
			return dst[:start], fmt.Errorf("vless: %w", err)
		}
		return out, nil
	}
	return dst[:start], errors.New("vless: unknown command")
}

// randN is a uniform number in [0, n).
func randN(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0
	}
	return int(v.Int64())
}

// AppendBlock appends one block carrying content (at most ContentMax
// bytes) with command cmd; uuid, when not nil, goes first (a direction's
// first block). long pads a short block to hide what it carries.
func AppendBlock(dst []byte, uuid *UUID, content []byte, cmd byte, long bool) []byte {
	n := len(content)
	var pad int
	if n < longBelow && long {
		pad = randN(longRand) + longBase - n
	} else {
		pad = randN(shortRand)
	}
	pad = max(0, min(pad, ContentMax-n))
	if uuid != nil {
		dst = append(dst, uuid[:]...)
	}
	dst = append(dst, cmd, byte(n>>8), byte(n), byte(pad>>8), byte(pad))
	dst = append(dst, content...)
	return append(dst, make([]byte, pad)...)
}

// Record starts of the inner TLS that Vision watches for.
var (
	tlsClientHandshake = []byte{0x16, 0x03}
	tlsServerHandshake = []byte{0x16, 0x03, 0x03}
	tlsApplicationData = []byte{0x17, 0x03, 0x03}
	tls13Versions      = []byte{0x00, 0x2b, 0x00, 0x02, 0x03, 0x04} // supported_versions: TLS 1.3
)

// CompleteRecords reports whether b is whole TLS application data records,
// one or more, and nothing else.
func CompleteRecords(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for len(b) > 0 {
		if len(b) < 5 || !bytes.Equal(b[:3], tlsApplicationData) {
			return false
		}
		n := 5 + int(binary.BigEndian.Uint16(b[3:5]))
		if n > len(b) {
			return false
		}
		b = b[n:]
	}
	return true
}

// SplitContent cuts b into the contents of blocks: pieces under ContentMax
// bytes, cut before an application data record where one starts late
// enough, in half of a block otherwise, as Xray reshapes its buffers.
func SplitContent(b []byte, out [][]byte) [][]byte {
	for len(b) >= ContentMax {
		cut := bytes.LastIndex(b[:ContentMax], tlsApplicationData)
		if cut < blockOverhead {
			cut = BlockMax / 2
		}
		out = append(out, b[:cut])
		b = b[cut:]
	}
	if len(b) > 0 {
		out = append(out, b)
	}
	return out
}

// Filter watches the first buffers of both directions for the inner TLS:
// a ClientHello, the server's hello and whether it chose TLS 1.3 with a
// cipher suite Vision copies directly. It is not safe for concurrent use.
type Filter struct {
	left      int // buffers still to watch
	helloLeft int // bytes of the server's hello still to look at; -1: none seen
	cipher    uint16
	TLS       bool // the inner traffic is TLS
	TLS12     bool // the server's hello was seen: TLS 1.2 or later
	Direct    bool // TLS 1.3 with a cipher suite other than AES-128-CCM-8
}

// NewFilter watches the first 8 buffers, as Xray does.
func NewFilter() *Filter { return &Filter{left: 8, helloLeft: -1} }

// Watching reports whether buffers are still looked at.
func (f *Filter) Watching() bool { return f.left > 0 }

// Left is the number of buffers still to watch.
func (f *Filter) Left() int { return f.left }

// Look looks at one buffer of either direction.
func (f *Filter) Look(b []byte) {
	if f.left <= 0 {
		return
	}
	f.left--
	if len(b) >= 6 {
		switch {
		case bytes.Equal(b[:3], tlsServerHandshake) && b[5] == 0x02: // ServerHello
			f.helloLeft = int(binary.BigEndian.Uint16(b[3:5])) + 5
			f.TLS12, f.TLS = true, true
			if len(b) >= 79 && f.helloLeft >= 79 {
				sid := int(b[43])
				if 46+sid <= len(b) {
					f.cipher = binary.BigEndian.Uint16(b[43+sid+1:])
				}
			}
		case bytes.Equal(b[:2], tlsClientHandshake) && b[5] == 0x01: // ClientHello
			f.TLS = true
		}
	}
	if f.helloLeft > 0 {
		end := min(f.helloLeft, len(b))
		f.helloLeft -= len(b)
		if bytes.Contains(b[:end], tls13Versions) {
			// TLS 1.3: every suite but AES-128-CCM-8 (0x1305) of the
			// five TLS 1.3 defines is copied directly.
			if f.cipher >= 0x1301 && f.cipher <= 0x1304 {
				f.Direct = true
			}
			f.left = 0
			return
		}
		if f.helloLeft <= 0 {
			f.left = 0 // TLS 1.2
		}
	}
}

// Unpadder removes the blocks of one direction: fed the direction's bytes
// in order, it returns the content and, once a block ended the padding,
// which command ended it. It is not safe for concurrent use.
type Unpadder struct {
	uuid    UUID
	started bool // the UUID was seen
	hdrLeft int  // header bytes still to read of the current block
	cmd     byte
	content int
	padding int
	ended   bool // a block with End or Direct is over
}

// NewUnpadder removes the blocks of a direction that starts with uuid.
func NewUnpadder(uuid UUID) *Unpadder { return &Unpadder{uuid: uuid} }

// Ended reports whether the padding is over, and with which command.
func (u *Unpadder) Ended() (bool, byte) { return u.ended, u.cmd }

// ErrBlock is the error of a block header that does not parse.
var ErrBlock error = &netx.FaultError{Kind: netx.FaultFraming, Err: errors.New("vless: vision block with an unknown command")}

// Feed appends to dst the content of b, and returns dst and how many bytes
// of b it took: all, unless a block ended the padding, after which the rest
// of b is not Vision's. A buffer before the UUID was seen that does not
// start with it passes unchanged, as Xray's reader lets it.
func (u *Unpadder) Feed(dst, b []byte) ([]byte, int, error) {
	if u.ended {
		return dst, 0, nil
	}
	i := 0
	if !u.started {
		if len(b) < blockOverhead || !bytes.Equal(b[:16], u.uuid[:]) {
			return append(dst, b...), len(b), nil
		}
		u.started = true
		u.hdrLeft = 5
		i = 16
	}
	for i < len(b) {
		switch {
		case u.hdrLeft > 0:
			c := b[i]
			i++
			switch u.hdrLeft {
			case 5:
				if c > CommandDirect {
					return dst, i, ErrBlock
				}
				u.cmd = c
			case 4:
				u.content = int(c) << 8
			case 3:
				u.content |= int(c)
			case 2:
				u.padding = int(c) << 8
			case 1:
				u.padding |= int(c)
			}
			u.hdrLeft--
		case u.content > 0:
			n := min(u.content, len(b)-i)
			dst = append(dst, b[i:i+n]...)
			u.content -= n
			i += n
		default:
			n := min(u.padding, len(b)-i)
			u.padding -= n
			i += n
		}
		if u.hdrLeft == 0 && u.content == 0 && u.padding == 0 {
			if u.cmd != CommandContinue {
				u.ended = true
				return dst, i, nil
			}
			u.hdrLeft = 5
		}
	}
	return dst, i, nil
}

// RecordTracker follows the TLS record boundaries of one direction's
// inner bytes across writes. Xray steps down only at a write made of whole
// application data records; a relay's reads seldom end on a record's end,
// so the tracker finds, in a write, the end of the last record once the
// inner client has sent application data (its second encrypted record, the
// first being its Finished): stepping down there is as valid, the bytes
// after it going on the TCP conn in order. It is not safe for concurrent
// use.
type RecordTracker struct {
	hdr     [5]byte
	have    int // header bytes gathered of the next record
	left    int // bytes of the current record's body to pass
	appData int // application data records passed whole
	inApp   bool
	lost    bool // the bytes are not TLS records: nothing to find
}

// Feed passes b and returns the offset in b just after the last record
// that ended in it once two application data records have ended, or -1.
func (r *RecordTracker) Feed(b []byte) int {
	cut := -1
	for i := 0; i < len(b) && !r.lost; {
		if r.left > 0 {
			n := min(r.left, len(b)-i)
			i += n
			r.left -= n
			if r.left == 0 {
				if r.inApp {
					r.appData++
				}
				if r.appData >= 2 {
					cut = i
				}
			}
			continue
		}
		r.hdr[r.have] = b[i]
		r.have++
		i++
		if r.have < 5 {
			continue
		}
		r.have = 0
		if r.hdr[0] < 0x14 || r.hdr[0] > 0x17 || r.hdr[1] != 0x03 {
			r.lost = true
			return -1
		}
		r.inApp = r.hdr[0] == 0x17
		r.left = int(binary.BigEndian.Uint16(r.hdr[3:5]))
		if r.left == 0 { // an empty record ends with its header
			if r.inApp {
				r.appData++
			}
			if r.appData >= 2 {
				cut = i
			}
		}
	}
	return cut
}
