package netx

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestTransientAccept(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{fmt.Errorf("wrapped: %w", syscall.ECONNABORTED), true},
		{os.ErrDeadlineExceeded, true},
		{net.ErrClosed, false},
		{errors.New("something else"), false},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EBADF)}, false},
	} {
		if got := TransientAccept(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
