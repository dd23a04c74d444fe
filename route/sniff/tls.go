package sniff

// TLS record and handshake constants.
const (
	recordHandshake      = 0x16
	handshakeClientHello = 0x01
	recordHeaderLen      = 5
	maxRecordLen         = 1 << 14
	maxClientHelloLen    = 1 << 18 // far beyond any real one; bounds the join
	extServerName        = 0x0000
	serverNameHost       = 0x00
)

// TLSServerName returns the server name (SNI host_name) of the TLS
// ClientHello at the start of b, lowercased and without a trailing dot. b may
// hold only the first record, or be cut anywhere: ok is then false unless the
// server_name extension is already whole. A ClientHello split over several
// handshake records is joined.
func TLSServerName(b []byte) (name string, ok bool) {
	name, r := clientHelloSNI(b)
	return name, r == found
}

func clientHelloSNI(b []byte) (string, result) {
	body, complete, r := clientHelloBody(b)
	if r != found {
		return "", r
	}
	return helloSNI(body, complete)
}

// helloSNI reads the server name from the body of a ClientHello handshake
// message (after its type and length), as much of it as body holds;
// complete says whether body is the whole message.
func helloSNI(body []byte, complete bool) (string, result) {
	// What a field running past the end means: more bytes may come, or
	// the message lied about its lengths.
	short := incomplete
	if complete {
		short = invalid
	}
	c := cursor{b: body}
	c.take(2 + 32)    // legacy_version, random
	c.take(c.u8())    // legacy_session_id
	c.take(c.u16())   // cipher_suites
	c.take(c.u8())    // legacy_compression_methods
	extLen := c.u16() // extensions
	if c.bad {
		if complete && len(body) > 0 && c.pos == len(body) {
			return "", absent // a ClientHello with no extensions
		}
		return "", short
	}
	exts := c.b
	extsWhole := complete
	if extLen <= len(exts) {
		exts = exts[:extLen]
	} else if complete {
		return "", invalid
	} else {
		extsWhole = false
	}
	e := cursor{b: exts}
	for len(e.b) > 0 {
		typ := e.u16()
		data := e.take(e.u16())
		if e.bad {
			if extsWhole {
				return "", invalid
			}
			return "", incomplete
		}
		if typ == extServerName {
			return serverName(data)
		}
	}
	if !extsWhole {
		return "", incomplete
	}
	return "", absent
}

// serverName reads a whole server_name extension and returns its host_name.
func serverName(data []byte) (string, result) {
	c := cursor{b: data}
	list := cursor{b: c.take(c.u16())}
	if c.bad {
		return "", invalid
	}
	for len(list.b) > 0 {
		typ := list.u8()
		name := list.take(list.u16())
		if list.bad {
			return "", invalid
		}
		if typ == serverNameHost {
			if n, ok := hostName(name); ok {
				return n, found
			}
			return "", invalid
		}
	}
	return "", absent
}

// clientHelloBody returns the body of the ClientHello at the start of b (as
// much of it as b holds) and whether it is whole. r is found when b starts
// like a ClientHello, incomplete when b is too short to tell.
func clientHelloBody(b []byte) (body []byte, complete bool, r result) {
	if len(b) == 0 {
		return nil, false, incomplete
	}
	if b[0] != recordHandshake || (len(b) > 1 && b[1] != 0x03) || (len(b) > 2 && b[2] > 0x04) {
		return nil, false, invalid
	}
	if len(b) < recordHeaderLen {
		return nil, false, incomplete
	}
	frag, whole, ok := record(b)
	if !ok {
		return nil, false, invalid
	}
	if len(frag) > 0 && frag[0] != handshakeClientHello {
		return nil, false, invalid
	}
	if len(frag) >= 4 {
		msgLen := int(frag[1])<<16 | int(frag[2])<<8 | int(frag[3])
		if msgLen > maxClientHelloLen {
			return nil, false, invalid
		}
		if 4+msgLen <= len(frag) {
			// The common case: the whole message in one record, used in place.
			return frag[4 : 4+msgLen], true, found
		}
		if !whole {
			return frag[4:], false, found
		}
	} else if !whole {
		return nil, false, incomplete
	}
	return joinRecords(b)
}

// record returns the fragment of the handshake record at the start of b (cut
// at the end of b) and whether the record is whole in b. b holds at least a
// record header.
func record(b []byte) (frag []byte, whole, ok bool) {
	n := int(b[3])<<8 | int(b[4])
	if n == 0 || n > maxRecordLen {
		return nil, false, false
	}
	end := recordHeaderLen + n
	if end > len(b) {
		return b[recordHeaderLen:], false, true
	}
	return b[recordHeaderLen:end], true, true
}

// joinRecords joins the fragments of the consecutive handshake records at the
// start of b into one ClientHello message and returns its body.
func joinRecords(b []byte) (body []byte, complete bool, r result) {
	var msg []byte
	for len(b) > 0 {
		if b[0] != recordHandshake {
			// Another content type before the ClientHello ended.
			return nil, false, invalid
		}
		if len(b) < recordHeaderLen {
			break
		}
		frag, whole, ok := record(b)
		if !ok {
			return nil, false, invalid
		}
		msg = append(msg, frag...)
		if len(msg) >= 4 {
			msgLen := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
			if msg[0] != handshakeClientHello || msgLen > maxClientHelloLen {
				return nil, false, invalid
			}
			if 4+msgLen <= len(msg) {
				return msg[4 : 4+msgLen], true, found
			}
		}
		if !whole {
			break
		}
		b = b[recordHeaderLen+len(frag):]
	}
	if len(msg) < 4 {
		return nil, false, incomplete
	}
	return msg[4:], false, found
}

// cursor reads big-endian fields; a read past the end sets bad, empties the
// cursor and returns zero values. pos counts the bytes read before that.
type cursor struct {
	b   []byte
	pos int
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n > len(c.b) {
		c.bad = true
		c.b = nil
		return nil
	}
	b := c.b[:n:n]
	c.b = c.b[n:]
	c.pos += n
	return b
}

func (c *cursor) u8() int {
	b := c.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (c *cursor) u16() int {
	b := c.take(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}
