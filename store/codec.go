package store

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"
)

// The encoding of keys and values; doc.go describes it.

// formatV1 is the first byte of every value written today.
const formatV1 = 1

// The buckets of the file.
var (
	bucketChoices = []byte("selector_choices")
	bucketDelays  = []byte("last_delays")
	bucketFakeIPs = []byte("fake_ips")
)

// fakeIPsKey is the one key of bucketFakeIPs: the mappings are one value.
var fakeIPsKey = appendName(nil, "mappings")

var (
	errFormat    = errors.New("unknown format")
	errTruncated = errors.New("truncated")
	errTrailing  = errors.New("trailing bytes")
	errRange     = errors.New("nanoseconds out of range")
	errLength    = errors.New("a length in more bytes than it needs")
	errAddr      = errors.New("an address of neither 0, 4 nor 16 bytes")
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

// appendTime appends t as Unix seconds (varint) and nanoseconds (unsigned
// varint).
func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// readTime reads a time written by appendTime from the start of b.
func readTime(b []byte) (time.Time, []byte, error) {
	sec, k := binary.Varint(b)
	if k <= 0 {
		return time.Time{}, nil, errTruncated
	}
	b = b[k:]
	nsec, k := binary.Uvarint(b)
	if k <= 0 {
		return time.Time{}, nil, errTruncated
	}
	if nsec >= uint64(time.Second) {
		return time.Time{}, nil, errRange
	}
	return time.Unix(sec, int64(nsec)), b[k:], nil
}

// appendAddr appends an address as its length in one byte (0 for none, 4
// or 16) and its bytes. A zone is not kept.
func appendAddr(b []byte, a netip.Addr) []byte {
	s := a.AsSlice()
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func readAddr(b []byte) (netip.Addr, []byte, error) {
	if len(b) == 0 {
		return netip.Addr{}, nil, errTruncated
	}
	n := int(b[0])
	b = b[1:]
	if n != 0 && n != 4 && n != 16 {
		return netip.Addr{}, nil, errAddr
	}
	if len(b) < n {
		return netip.Addr{}, nil, errTruncated
	}
	a, _ := netip.AddrFromSlice(b[:n]) // invalid for 0 bytes
	return a, b[n:], nil
}

// minFakeIPMapping is the fewest bytes one mapping takes: an empty name, no
// addresses, a time in one byte each of seconds and nanoseconds.
const minFakeIPMapping = 5

func encodeFakeIPs(ms []FakeIPMapping) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, m := range ms {
		size += binary.MaxVarintLen64 + len(m.Name) + 2 + 4 + 16 + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, size)
	b = append(b, formatV1)
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = appendName(b, m.Name)
		b = appendAddr(b, m.V4)
		b = appendAddr(b, m.V6)
		b = appendTime(b, m.LastUsed)
	}
	return b
}

func decodeFakeIPs(b []byte) ([]FakeIPMapping, error) {
	if len(b) == 0 || b[0] != formatV1 {
		return nil, errFormat
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errTruncated
	}
	b = b[k:]
	if n > uint64(len(b)/minFakeIPMapping) {
		return nil, errTruncated // more mappings than the bytes can hold
	}
	out := make([]FakeIPMapping, 0, n)
	for range n {
		var m FakeIPMapping
		var err error
		if m.Name, b, err = readName(b); err != nil {
			return nil, err
		}
		if m.V4, b, err = readAddr(b); err != nil {
			return nil, err
		}
		if m.V6, b, err = readAddr(b); err != nil {
			return nil, err
		}
		if m.LastUsed, b, err = readTime(b); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(b) > 0 {
		return nil, errTrailing
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
