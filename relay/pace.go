package relay

import "switchyard/netx"

// A paced flow keeps the splice path: the direction moves at most the step
// its Paced layers allow at once, and after reporting the bytes waits out
// the pause they cost under their rate. On the userspace path the layers'
// own Read and Write pace themselves.

// pacedLayer is a Paced layer of a spliced direction, and which of its sides
// the direction moves: its reads (a source layer) or its writes.
type pacedLayer struct {
	p    netx.Paced
	read bool
}

// pacedLayers appends the Paced layers among src (read) and dst (written)
// to out.
func pacedLayers(out []pacedLayer, src, dst []netx.Observed) []pacedLayer {
	for _, l := range src {
		if p, ok := l.(netx.Paced); ok {
			out = append(out, pacedLayer{p, true})
		}
	}
	for _, l := range dst {
		if p, ok := l.(netx.Paced); ok {
			out = append(out, pacedLayer{p, false})
		}
	}
	return out
}

// step bounds n, the bytes the direction would splice next, by its paced
// layers' steps.
func (d *direction) step(n int64) int64 {
	for _, l := range d.paced {
		if s := l.p.Step(l.read); s > 0 && s < n {
			n = s
		}
	}
	return n
}

// pace waits out the pause n spliced bytes cost on every paced layer; an
// error means the flow ended meanwhile.
func (d *direction) pace(n int64) error {
	for _, l := range d.paced {
		if err := l.p.Pace(l.read, n); err != nil {
			return err
		}
	}
	return nil
}
