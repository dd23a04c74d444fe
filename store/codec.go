package store

import (
	"encoding/binary"
	"errors"
	"time"
)

// The encoding of keys and values; doc.go describes it.

// formatV1 is the first byte of every value written today.
const formatV1 = 1

// The buckets of the file.
var (
	bucketChoices = []byte("selector_choices")
	bucketDelays  = []byte("last_delays")
)

var (
	errFormat    = errors.New("unknown format")
	errTruncated = errors.New("truncated")
	errTrailing  = errors.New("trailing bytes")
	errRange     = errors.New("nanoseconds out of range")
	errLength    = errors.New("a length in more bytes than it needs")
)

// appendName appends s with its length in front.
func appendName(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readName reads one name written by appendName from the start of b and
// returns it and the rest of b. A length written in more bytes than it
// needs is refused: a key has one encoding, so that one name is never two
// keys of the file.
func readName(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, errTruncated
	}
	if k != len(binary.AppendUvarint(nil, n)) {
		return "", nil, errLength
	}
	b = b[k:]
	return string(b[:n]), b[n:], nil
}

func choiceKey(group, network string) []byte {
	return appendName(appendName(nil, group), network)
}

func decodeChoiceKey(b []byte) (group, network string, err error) {
	if group, b, err = readName(b); err != nil {
		return "", "", err
	}
	if network, b, err = readName(b); err != nil {
		return "", "", err
	}
	if len(b) > 0 {
		return "", "", errTrailing
	}
	return group, network, nil
}

func delayKey(node string) []byte { return appendName(nil, node) }

func decodeDelayKey(b []byte) (string, error) {
	node, rest, err := readName(b)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", errTrailing
	}
	return node, nil
}

func encodeChoice(member string) []byte {
	return append([]byte{formatV1}, member...)
}

func decodeChoice(b []byte) (string, error) {
	if len(b) == 0 || b[0] != formatV1 {
		return "", errFormat
	}
	return string(b[1:]), nil
}

func encodeDelay(d Delay) []byte {
	b := []byte{formatV1}
	b = binary.AppendVarint(b, int64(d.RTT))
	b = binary.AppendVarint(b, d.At.Unix())
	return binary.AppendUvarint(b, uint64(d.At.Nanosecond()))
}

func decodeDelay(b []byte) (Delay, error) {
	if len(b) == 0 || b[0] != formatV1 {
		return Delay{}, errFormat
	}
	b = b[1:]
	rtt, k := binary.Varint(b)
	if k <= 0 {
		return Delay{}, errTruncated
	}
	b = b[k:]
	sec, k := binary.Varint(b)
	if k <= 0 {
		return Delay{}, errTruncated
	}
	b = b[k:]
	nsec, k := binary.Uvarint(b)
	if k <= 0 {
		return Delay{}, errTruncated
	}
	if nsec >= uint64(time.Second) {
		return Delay{}, errRange
	}
	if len(b) > k {
		return Delay{}, errTrailing
	}
	return Delay{RTT: time.Duration(rtt), At: time.Unix(sec, int64(nsec))}, nil
}
