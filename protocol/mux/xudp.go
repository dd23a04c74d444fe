package mux

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/netip"
)

// XUDP carries one UDP association over one Mux.Cool session: the New frame
// opens it toward the first packet's peer and carries the association's
// global ID, and every later packet travels in a Keep frame that names its
// own peer, both ways. The global ID lets a server that still holds the
// association's UDP socket (after the connection carrying it was lost) hand
// it to the new connection, so the peers keep seeing one source port.

// XUDPSession is the session ID an XUDP connection uses: it carries one
// session only.
const XUDPSession = 0

// GlobalIDKeyLen is the length of the key GlobalID derives IDs with.
const GlobalIDKeyLen = 32

// GlobalID derives the XUDP global ID of a UDP association from its source:
// a keyed hash, so one source keeps one ID for as long as the key lives, and
// no one without the key can tell which source an ID stands for. The ID is
// never zero, which would mean "no global ID".
func GlobalID(key *[GlobalIDKeyLen]byte, source netip.AddrPort) [8]byte {
	var text [64]byte
	h := hmac.New(sha256.New, key[:])
	h.Write(source.AppendTo(text[:0]))
	var sum [sha256.Size]byte
	id := [8]byte(h.Sum(sum[:0]))
	if id == [8]byte{} {
		id[7] = 1
	}
	return id
}
