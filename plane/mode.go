package plane

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Mode is how a plane routes the flows that are not DNS interceptions:
// by the rules (ModeRule), all to the GLOBAL selector's choice
// (ModeGlobal), or all to the direct outbound (ModeDirect), as Clash's
// rule, global and direct modes.
type Mode uint32

const (
	ModeRule Mode = iota
	ModeGlobal
	ModeDirect
)

// Modes are the modes' names, in Clash's words, by Mode.
var Modes = [...]string{ModeRule: "rule", ModeGlobal: "global", ModeDirect: "direct"}

func (m Mode) String() string {
	if int(m) < len(Modes) {
		return Modes[m]
	}
	return fmt.Sprintf("mode(%d)", uint32(m))
}

// ErrUnknownMode refuses a mode name that is none of Modes.
var ErrUnknownMode = errors.New("unknown mode")

// ParseMode reads a mode name, whatever its case ("Global" is global).
func ParseMode(s string) (Mode, error) {
	for i, n := range Modes {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return ModeRule, fmt.Errorf("%q: %w (one of %s)", s, ErrUnknownMode, strings.Join(Modes[:], ", "))
}

// ModeCell holds the mode in force. One cell outlives the planes: the
// supervisor gives every plane it publishes the same cell, so a mode
// change applies at once to every flow routed after it, on whatever plane,
// and a reload does not undo it. A nil cell reads ModeRule.
type ModeCell struct{ v atomic.Uint32 }

// Load returns the mode in force.
func (c *ModeCell) Load() Mode {
	if c == nil {
		return ModeRule
	}
	return Mode(c.v.Load())
}

// Store sets the mode; it reports whether it changed.
func (c *ModeCell) Store(m Mode) bool { return Mode(c.v.Swap(uint32(m))) != m }
