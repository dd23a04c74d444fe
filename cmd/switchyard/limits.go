package main

import "syscall"

// raiseFileLimit raises the soft descriptor limit to the hard one and
// returns the limit in force. Every client, upstream and listener takes a
// descriptor, and the process's dial admission gate is sized from this
// limit at its first use, so this runs first, before anything is built.
func raiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return lim.Cur
}
