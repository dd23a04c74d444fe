package remote

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// UserInfo is a subscription's subscription-userinfo header: bytes
// uploaded, downloaded, the total allowed, and when it expires (Unix
// seconds; 0 = not said). The JSON names are the ones mihomo's API shows.
type UserInfo struct {
	Upload   int64 `json:"Upload"`
	Download int64 `json:"Download"`
	Total    int64 `json:"Total"`
	Expire   int64 `json:"Expire"`
}

// maxUserInfoHeader bounds the header text parsed.
const maxUserInfoHeader = 1024

// ParseUserInfo reads a subscription-userinfo header such as
// "upload=1; download=2; total=3; expire=4": fields in any order and case,
// spaces around them, missing fields (left 0), numbers written as floats
// ("1.5e9", "123.0"), unknown fields ignored. ok is false when no known
// field has a number. A value out of range is clamped; a negative one is 0.
func ParseUserInfo(h string) (u UserInfo, ok bool) {
	if len(h) > maxUserInfoHeader {
		h = h[:maxUserInfoHeader]
	}
	for _, field := range strings.FieldsFunc(h, func(r rune) bool { return r == ';' || r == ',' }) {
		k, v, found := strings.Cut(field, "=")
		if !found {
			continue
		}
		var dst *int64
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "upload":
			dst = &u.Upload
		case "download":
			dst = &u.Download
		case "total":
			dst = &u.Total
		case "expire":
			dst = &u.Expire
		default:
			continue
		}
		n, good := number(strings.TrimSpace(v))
		if !good {
			continue
		}
		*dst, ok = n, true
	}
	return u, ok
}

// number parses an integer or a float, clamped to 0..MaxInt64.
func number(s string) (int64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return max(n, 0), true
	}
	f, err := strconv.ParseFloat(s, 64)
	var ne *strconv.NumError
	if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
		err = nil // ±Inf, clamped below
	}
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	switch {
	case f <= 0:
		return 0, true
	case f >= math.MaxInt64:
		return math.MaxInt64, true
	}
	return int64(f), true
}
