package transport

import (
	"encoding/binary"
)

// A gRPC message is a 1-byte compression flag and a 4-byte big-endian
// length, then the message: here the protobuf Hunk{bytes data = 1} (gun) or
// MultiHunk{repeated bytes data = 1} (multi). One data field of either is
// the same bytes on the wire: the tag 0x0A, a varint length, the data.
const (
	grpcMsgHeader = 5
	hunkTag       = 0x0A // field 1, wire type 2 (length-delimited)
	// maxHunkPrefix is the gRPC header, the tag and a 3-byte varint: a
	// data field up to 2 MiB.
	maxHunkPrefix = grpcMsgHeader + 1 + 3
)

// appendHunk appends one gRPC message carrying data as a single data field.
func appendHunk(b, data []byte) []byte {
	field := 1 + uvarintLen(uint64(len(data))) + len(data)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(field))
	b = append(b, hunkTag)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// The errors of server bytes that are not a stream of Hunk messages; each
// fails the flow, as netx.FaultFraming.
var (
	errHunkCompressed = framingError("grpc: the server sent a compressed message, and no compression was agreed")
	errHunkField      = framingError("grpc: a protobuf field runs past the end of its message")
	errHunkVarint     = framingError("grpc: a protobuf varint is longer than 10 bytes")
	errHunkWireType   = framingError("grpc: a protobuf field has an unknown wire type")
	errHunkFieldZero  = framingError("grpc: a protobuf field number is 0")
	errHunkTruncated  = framingError("grpc: the stream ended inside a message")
)

// hunkDecoder states.
const (
	hdMsgHeader  = iota // reading the 5-byte gRPC message header
	hdTag               // reading a field's tag
	hdLen               // reading a length-delimited field's length
	hdData              // copying a data field's bytes out
	hdSkip              // skipping bytes of another field
	hdSkipVarint        // skipping a varint field
)

// hunkDecoder turns the server's byte stream back into the payload: it
// takes every data field (field 1) of every message in order and skips
// other fields. It never buffers a message; state survives any split of
// the input.
type hunkDecoder struct {
	state   uint8
	hdr     [grpcMsgHeader]byte
	hdrN    int
	msgLeft uint64 // bytes of the current message not yet consumed
	varint  uint64
	shift   uint
	isData  bool   // the length-delimited field being read is field 1
	left    uint64 // bytes left of the current data or skipped field
}

// atBoundary reports whether the input so far ended between messages.
func (d *hunkDecoder) atBoundary() bool { return d.state == hdMsgHeader && d.hdrN == 0 }

// feed consumes bytes from in and writes payload into out. It stops when in
// is used up or out is full; nin and nout say how far it got.
func (d *hunkDecoder) feed(in, out []byte) (nin, nout int, err error) {
	for nin < len(in) {
		switch d.state {
		case hdMsgHeader:
			c := copy(d.hdr[d.hdrN:], in[nin:])
			d.hdrN += c
			nin += c
			if d.hdrN < grpcMsgHeader {
				continue
			}
			d.hdrN = 0
			if d.hdr[0] != 0 {
				return nin, nout, errHunkCompressed
			}
			d.msgLeft = uint64(binary.BigEndian.Uint32(d.hdr[1:]))
			d.next()
		case hdTag, hdLen, hdSkipVarint:
			b := in[nin]
			nin++
			d.msgLeft--
			if d.shift >= 64 {
				return nin, nout, errHunkVarint
			}
			d.varint |= uint64(b&0x7F) << d.shift
			d.shift += 7
			if b&0x80 != 0 {
				if d.msgLeft == 0 {
					return nin, nout, errHunkField
				}
				continue
			}
			v := d.varint
			d.varint, d.shift = 0, 0
			if err := d.endVarint(v); err != nil {
				return nin, nout, err
			}
		case hdData:
			if nout == len(out) {
				return nin, nout, nil
			}
			n := min(uint64(len(in)-nin), uint64(len(out)-nout), d.left)
			copy(out[nout:], in[nin:nin+int(n)])
			nin += int(n)
			nout += int(n)
			d.left -= n
			d.msgLeft -= n
			if d.left == 0 {
				d.next()
			}
		case hdSkip:
			n := min(uint64(len(in)-nin), d.left)
			nin += int(n)
			d.left -= n
			d.msgLeft -= n
			if d.left == 0 {
				d.next()
			}
		}
	}
	return nin, nout, nil
}

// endVarint acts on a whole varint read in state hdTag, hdLen or
// hdSkipVarint.
func (d *hunkDecoder) endVarint(v uint64) error {
	switch d.state {
	case hdTag:
		if v>>3 == 0 {
			return errHunkFieldZero
		}
		switch v & 7 {
		case 0:
			d.state = hdSkipVarint
			if d.msgLeft == 0 {
				return errHunkField
			}
			return nil
		case 1:
			return d.field(8, hdSkip)
		case 2:
			d.isData = v>>3 == 1
			d.state = hdLen
			if d.msgLeft == 0 {
				return errHunkField
			}
			return nil
		case 5:
			return d.field(4, hdSkip)
		}
		return errHunkWireType
	case hdLen:
		if d.isData {
			return d.field(v, hdData)
		}
		return d.field(v, hdSkip)
	}
	d.next() // hdSkipVarint
	return nil
}

// field starts a field body of n bytes in state st.
func (d *hunkDecoder) field(n uint64, st uint8) error {
	if n > d.msgLeft {
		return errHunkField
	}
	d.left = n
	d.state = st
	if n == 0 {
		d.next()
	}
	return nil
}

// next moves to the next field, or the next message when this one is done.
func (d *hunkDecoder) next() {
	if d.msgLeft == 0 {
		d.state = hdMsgHeader
		return
	}
	d.state = hdTag
}
