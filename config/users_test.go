package config

import (
	"errors"
	"strings"
	"testing"

	"switchyard/spec"
)

func TestUserRatesAreLowered(t *testing.T) {
	s, _, err := Parse([]byte(`[[inbounds]]
tag = "s"
type = "socks"
listen = "127.0.0.1:1080"
users = [{ username = "a", password = "p", up_mbps = 2, down_mbps = 10 }, { username = "b", password = "p" }]
[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:8080"
users = [{ username = "a", password = "other", up_mbps = 2, down_mbps = 10 }]
`), "sy.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []spec.User{{Username: "a", Password: "p", UpMbps: 2, DownMbps: 10}, {Username: "b", Password: "p"}}
	if got := s.Inbounds[0].Users; !spec.Equal(got, want) {
		t.Fatalf("users %+v, want %+v", got, want)
	}
	if got := s.Inbounds[1].Users[0]; got.UpMbps != 2 || got.DownMbps != 10 {
		t.Fatalf("second inbound's user %+v", got)
	}
}

func TestUserRateErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"a negative rate", socksIn + `users = [
  { username = "a", password = "p", up_mbps = -1 },
  { username = "b", password = "p", down_mbps = 4294967296 },
]
`, []want{
			{6, "inbounds[0].users[0].up_mbps", "-1 is out of range 0..2147483647"},
			{7, "inbounds[0].users[1].down_mbps", "4294967296 is out of range"},
		}},
		{"one user paced two ways", socksIn + `users = [{ username = "a", password = "p", up_mbps = 1 }]
[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:8080"
users = [{ username = "a", password = "p", up_mbps = 2 }]
`, []want{
			{10, "inbounds[1].users[0]", `user "a" is paced at up_mbps = 1, down_mbps = 0 on line 5`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.text), "sy.toml")
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %v, want Errors", err)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, w := range tc.want {
				e := errs[i]
				if e.Line != w.line || e.Key != w.key || !strings.Contains(e.Msg, w.msg) {
					t.Errorf("problem %d:\n got  %s\n want sy.toml:%d: %s: ...%s...", i, e, w.line, w.key, w.msg)
				}
			}
		})
	}
}
