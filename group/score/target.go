package score

import (
	"errors"
	"fmt"
	"strconv"

	"switchyard/netx"
)

// MaxNameLen bounds a normalized domain target (without its port): the
// longest name DNS can carry. A longer name is refused, which also bounds
// the key memory of an exact cell.
const MaxNameLen = 253

// ErrBadTarget is returned for a target that cannot key an exact cell.
var ErrBadTarget = errors.New("score: bad target")

// target is a normalized business target: a domain ASCII-lowercased with
// one trailing dot removed, its port kept ("example.com:443"), or an IP's
// socket address ("192.0.2.1:53", "[2001:db8::1]:443"). ip tells the two
// apart, so a name that looks like an address never shares a cell with
// the address.
type target struct {
	text string
	ip   bool
}

// normalizeTarget returns a's exact-cell target. The zero Addr (no host)
// is the targetless case: ok is false and err nil.
func normalizeTarget(a netx.Addr) (t target, ok bool, err error) {
	if a.Name == "" {
		if !a.IP.IsValid() {
			return target{}, false, nil
		}
		ap, _ := a.AddrPort()
		return target{text: ap.String(), ip: true}, true, nil
	}
	name := a.Name
	if name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if name == "" {
		return target{}, false, fmt.Errorf("%w: empty domain", ErrBadTarget)
	}
	if len(name) > MaxNameLen {
		return target{}, false, fmt.Errorf("%w: domain longer than %d bytes", ErrBadTarget, MaxNameLen)
	}
	buf := make([]byte, 0, len(name)+6)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return target{}, false, fmt.Errorf("%w: control byte or space in domain", ErrBadTarget)
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	buf = append(buf, ':')
	buf = strconv.AppendUint(buf, uint64(a.Port), 10)
	return target{text: string(buf)}, true, nil
}

// NormalizeTarget returns the text an exact cell keys a's target by (see
// the package documentation), or ErrBadTarget. The zero Addr has no
// target and returns "". The result is scorer-private: it is the form
// compared, never a form to log.
func NormalizeTarget(a netx.Addr) (string, error) {
	t, _, err := normalizeTarget(a)
	return t.text, err
}

// familyOf returns the family of an IP target, else fam.
func familyOf(a netx.Addr, fam netx.Family) netx.Family {
	if a.Name == "" && a.IP.IsValid() {
		if a.IP.Unmap().Is4() {
			return netx.V4
		}
		return netx.V6
	}
	return fam
}
