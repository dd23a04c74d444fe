//go:build !linux

package netx

// PollSources: no Poller here (poller_other.go).
func (u *DualUDP) PollSources(func()) []PollSource { return nil }
