//go:build !linux

package tun

import "os"

// rawFile: the device is read through its Read everywhere but on Linux.
func rawFile(interface{ BatchSize() int }) (*os.File, bool) { return nil, false }

func (in *Inbound) readRaw(*os.File) {}

func segmentationOffload(*os.File) bool { return false }
