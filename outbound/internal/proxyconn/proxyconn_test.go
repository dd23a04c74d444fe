package proxyconn

import (
	"errors"
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestErrorKinds(t *testing.T) {
	for _, err := range []error{ErrHandshakeClosed, ErrFrameClosed} {
		if !errors.Is(err, err) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%v does not match io.ErrUnexpectedEOF", err)
		}
	}
	if errors.Is(ErrHandshakeClosed, ErrFrameClosed) || errors.Is(ErrUpstreamFrameTooLarge, ErrFrameTooLarge) {
		t.Error("two kinds match each other")
	}
}
