package main

import (
	"syscall"
	"testing"
)

func TestRaiseFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 256 {
		t.Skipf("hard descriptor limit %d is too low to lower the soft one", orig.Max)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	low := syscall.Rlimit{Cur: 128, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	if got := raiseFileLimit(); got != orig.Max {
		t.Fatalf("raiseFileLimit() = %d, want the hard limit %d", got, orig.Max)
	}
	var now syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now)
	if now.Cur != orig.Max {
		t.Fatalf("soft limit %d after the raise, want %d", now.Cur, orig.Max)
	}
}
