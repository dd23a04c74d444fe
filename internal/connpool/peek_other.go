//go:build !linux

package connpool

// probeFD cannot look into a socket here: every connection reads as
// closed, so nothing is ever handed out from a pool (Put refuses).
func probeFD(uintptr) probe { return probeClosed }

const canProbe = false
