//go:build !linux

package netx

import "errors"

var errLinuxOnly = errors.New("only supported on Linux")

func bindToDevice(uintptr, string) error { return errLinuxOnly }

func setMark(uintptr, uint32) error { return errLinuxOnly }
