package remote

import (
	"math"
	"testing"
)

func TestParseUserInfo(t *testing.T) {
	for _, c := range []struct {
		in   string
		want UserInfo
		ok   bool
	}{
		{"upload=1; download=2; total=3; expire=4", UserInfo{1, 2, 3, 4}, true},
		{"upload=1;download=2;total=3;expire=4", UserInfo{1, 2, 3, 4}, true},
		{"  Upload = 455727941 ;  Download=6174315083 ; Total = 1073741824000 ; ", UserInfo{455727941, 6174315083, 1073741824000, 0}, true},
		{"upload=1.5e9; download=2.0; total=3.99", UserInfo{1500000000, 2, 3, 0}, true},
		{"total=107374182400", UserInfo{Total: 107374182400}, true},
		{"upload=-5; expire=", UserInfo{}, true},
		{"upload=1e400", UserInfo{Upload: math.MaxInt64}, true},
		{"upload=abc; note=1", UserInfo{}, false},
		{"", UserInfo{}, false},
		{"expire=NaN", UserInfo{}, false},
	} {
		got, ok := ParseUserInfo(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseUserInfo(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseUserInfo(f *testing.F) {
	for _, s := range []string{"upload=1; download=2; total=3; expire=4", "upload=1.5e9", "total=", ";;=;", "expire=-1e99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := ParseUserInfo(s)
		if u.Upload < 0 || u.Download < 0 || u.Total < 0 || u.Expire < 0 {
			t.Fatalf("negative field: %+v", u)
		}
		if !ok && u != (UserInfo{}) {
			t.Fatalf("not ok but fields set: %+v", u)
		}
	})
}
