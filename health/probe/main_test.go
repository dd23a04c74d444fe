package probe

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a probe or a test server starts has ended when the tests
// do.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
