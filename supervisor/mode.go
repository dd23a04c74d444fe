package supervisor

import (
	"errors"
	"fmt"
	"sync/atomic"

	"switchyard/group"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/store"
)

// modes is the routing mode: one cell every plane the supervisor publishes
// shares, so a change applies at once to every flow routed after it and a
// reload does not undo it; and the [route] mode of the configuration in
// force, which decides whether a reload or a start changes the mode.
//
// The mode follows the last word said: PATCH /configs sets it and the
// store keeps it, with the file's mode at that moment. At start the kept
// mode applies while the file still says what it said then; a file whose
// mode was edited since wins. A reload that changes the file's mode
// applies it; one that leaves it alone keeps the mode in force. (mihomo
// keeps no mode across a restart; sing-box's cache file, with store_mode,
// wins over default_mode always, even after the file was edited.)
//
// A change empties the DNS cache, as sing-box does: whether a name gets a
// fake address depends on where its flows go, which the mode changes.
type modes struct {
	cell plane.ModeCell
	file atomic.Uint32 // the plane.Mode of the spec in force
}

// specMode is the mode a spec's [route] asks for ("" is rule).
func specMode(s *spec.Spec) plane.Mode {
	m, err := plane.ParseMode(s.Route.Mode)
	if err != nil {
		return plane.ModeRule
	}
	return m
}

// ErrNoGlobal is the answer to a GLOBAL write before any plane exists.
var ErrNoGlobal = errors.New("no GLOBAL selector")

// attachModes gives pl the rules that apply in every mode — those that
// send to a block outbound —, its GLOBAL selector — every group, balancer and
// outbound in that order, defaulting to the final target — and the direct
// target the direct mode routes to: the outbound tagged "direct" (the
// built-in one unless the file declares its own) when it is of type
// direct, else the first outbound of type direct, else "direct" whatever
// it is.
func attachModes(pl *plane.Plane, s *spec.Spec, groups *group.Manager, targets map[string]*plane.Target) error {
	if _, ok := targets[plane.GlobalTag]; ok {
		return fmt.Errorf("the tag %q is reserved for the GLOBAL selector", plane.GlobalTag)
	}
	members := make([]string, 0, len(targets))
	if groups != nil {
		members = append(members, groups.Tags()...)
	}
	for _, b := range s.Balancers {
		members = append(members, b.Tag)
	}
	for _, o := range s.Outbounds {
		members = append(members, o.Tag)
	}
	g, err := plane.NewGlobal(members, targets, s.Route.Final, uint32(pl.Epoch))
	if err != nil {
		return err
	}
	pl.Global = g
	blocks := map[string]bool{}
	for _, o := range s.Outbounds {
		if o.Type == "block" {
			blocks[o.Tag] = true
		}
	}
	for i, r := range s.Rules {
		if blocks[r.Outbound] {
			pl.Blocks = append(pl.Blocks, i)
		}
	}
	pl.Direct = targets["direct"]
	for _, o := range s.Outbounds {
		if o.Tag == "direct" && o.Type == "direct" {
			return nil
		}
	}
	for _, o := range s.Outbounds {
		if o.Type == "direct" {
			pl.Direct = targets[o.Tag]
			return nil
		}
	}
	return nil
}

// startMode sets the mode at start (see modes) and restores the GLOBAL
// choice the store kept onto the first plane.
func (sv *Supervisor) startMode(s *spec.Spec, pl *plane.Plane) {
	file := specMode(s)
	sv.modes.file.Store(uint32(file))
	mode := file
	st := sv.opts.Store
	if st != nil {
		if kept, ok := st.Mode(); ok {
			m, err := plane.ParseMode(kept.Mode)
			switch {
			case err == nil && kept.File == file.String():
				mode = m
				sv.log.Debug("mode restored", "mode", mode.String())
			default:
				sv.log.Info("the configuration's mode replaces the one set through the API", "mode", file.String(), "was", kept.Mode)
				st.SetMode(store.ModeChoice{Mode: file.String(), File: file.String()})
			}
		}
	}
	sv.modes.cell.Store(mode)
	pl.Mode = &sv.modes.cell
	if st == nil || pl.Global == nil {
		return
	}
	if member, ok := st.GlobalChoice(); ok && member != "" {
		if err := pl.Global.Select(member); err != nil {
			sv.log.Info("the GLOBAL choice kept is gone: GLOBAL goes to its default", "member", member, "default", pl.Global.Default())
			st.SetGlobalChoice("")
		} else {
			sv.log.Debug("GLOBAL choice restored", "member", member)
		}
	}
}

// reloadMode gives a reload's plane the mode cell, and applies the file's
// mode when the reload changed it. Called under sv.mu, before publication.
func (sv *Supervisor) reloadMode(s *spec.Spec, pl *plane.Plane) {
	pl.Mode = &sv.modes.cell
	file := specMode(s)
	if old := plane.Mode(sv.modes.file.Swap(uint32(file))); old == file {
		return
	}
	if sv.modes.cell.Store(file) {
		sv.FlushDNS()
	}
	sv.log.Info("mode changed by the configuration", "mode", file.String())
	if st := sv.opts.Store; st != nil {
		st.SetMode(store.ModeChoice{Mode: file.String(), File: file.String()})
	}
}

// carryGlobal moves the GLOBAL choice of the plane in force onto the next
// one, when its member is still there and the same thing (see
// plane.Global.Carry); otherwise GLOBAL goes to its default, said in a
// log line. Called under publishMu, before next is published.
func (sv *Supervisor) carryGlobal(old, next *plane.Plane) {
	if old == nil || old.Global == nil || next.Global == nil {
		return
	}
	tag, had, carried := next.Global.Carry(old.Global)
	if !had || carried {
		return
	}
	sv.log.Info("the GLOBAL choice is gone after the reload: GLOBAL goes to its default", "member", tag, "default", next.Global.Default())
	if st := sv.opts.Store; st != nil {
		st.SetGlobalChoice("")
	}
}

// Mode is the routing mode in force.
func (sv *Supervisor) Mode() plane.Mode { return sv.modes.cell.Load() }

// SetMode changes the routing mode at once, for every flow routed after
// it; flows already open keep their route. The store keeps it (see
// modes).
func (sv *Supervisor) SetMode(m plane.Mode) error {
	if int(m) >= len(plane.Modes) {
		return fmt.Errorf("%d: %w", m, plane.ErrUnknownMode)
	}
	changed := sv.modes.cell.Store(m)
	if st := sv.opts.Store; st != nil {
		st.SetMode(store.ModeChoice{Mode: m.String(), File: plane.Mode(sv.modes.file.Load()).String()})
	}
	if changed {
		sv.FlushDNS()
		sv.log.Info("mode changed", "mode", m.String())
	}
	return nil
}

// Global is the GLOBAL selector of the plane in force (nil before one).
func (sv *Supervisor) Global() *plane.Global {
	if p := sv.cell.Load(); p != nil {
		return p.Global
	}
	return nil
}

// SelectGlobal makes member the GLOBAL selector's choice, kept in the
// store. It serializes with publication as SelectGroup does: the write
// lands on the plane a reload carries the choice from, or on the one it
// published. Flows already open keep their route.
func (sv *Supervisor) SelectGlobal(member string) error {
	sv.publishMu.Lock()
	defer sv.publishMu.Unlock()
	g := sv.Global()
	if g == nil {
		return ErrNoGlobal
	}
	if err := g.Select(member); err != nil {
		return err
	}
	if st := sv.opts.Store; st != nil {
		st.SetGlobalChoice(member)
	}
	sv.log.Info("GLOBAL choice changed", "member", member)
	return nil
}

// ClearGlobal drops the GLOBAL choice: GLOBAL goes to the final target.
func (sv *Supervisor) ClearGlobal() error {
	sv.publishMu.Lock()
	defer sv.publishMu.Unlock()
	g := sv.Global()
	if g == nil {
		return ErrNoGlobal
	}
	g.Clear()
	if st := sv.opts.Store; st != nil {
		st.SetGlobalChoice("")
	}
	sv.log.Info("GLOBAL choice cleared", "default", g.Default())
	return nil
}

// ClearSelector drops a selector group's runtime choice on networks (both
// when none), back to its default, and returns how many flows through the
// old choice were interrupted (see group.Manager.Clear). It serializes
// with publication as SelectGroup does.
func (sv *Supervisor) ClearSelector(tag string, networks ...netx.Network) (int, error) {
	for {
		sv.publishMu.Lock()
		m := sv.groups.Load()
		sv.publishMu.Unlock()
		if m == nil {
			return 0, fmt.Errorf("group %q: %w", tag, ErrNoGroups)
		}
		n, err := m.Clear(tag, networks...)
		if errors.Is(err, group.ErrReplaced) {
			continue
		}
		return n, err
	}
}
