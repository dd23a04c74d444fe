//go:build !linux

package tun

import (
	"io"
	"os"

	"switchyard/netx"
)

// rawFile: the device is read through its Read everywhere but on Linux.
func rawFile(interface{ BatchSize() int }) (*os.File, bool) { return nil, false }

func (in *Inbound) readRaw(*os.File) {}

func segmentationOffload(*os.File) bool { return false }

func deviceWriter(f *os.File) io.Writer { return f }

func (in *Inbound) pollRaw(*netx.Poller, *os.File) error { return netx.ErrNoPoller }
