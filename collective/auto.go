package collective

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/tuning"
)

// costModel is the group's cost model (internal/tuning), measured once per
// group on a rank's device (the first time Auto must choose). Every rank
// uses the same measured constants, so every rank makes the same choice for
// the same call; the choice is also part of the call's fingerprint, which
// would catch a disagreement before any data moved.
type costModel struct{ tuning.Shared }

// linkPathOf returns how g's links move slots (within its process).
func linkPathOf(g *Group) tuning.LinkPath {
	if g.tr != nil {
		return tuning.LinksCopied
	}
	if g.sharedMem {
		return tuning.LinksShared
	}
	for _, d := range g.devs {
		if _, ok := d.(backend.Importer); !ok {
			return tuning.LinksCopied
		}
	}
	return tuning.LinksImported
}

// measureOn measures the model (once per group) as an operation of c,
// from outside any collective.
func (g *Group) measureOn(c *Comm) (m *costModel, err error) {
	ctx := context.Background()
	owned, err := c.claim(ctx, "cost model")
	if err != nil {
		return nil, err
	}
	defer c.release(owned)
	if _, err := c.enter(ctx, "cost model", false); err != nil {
		return nil, err
	}
	defer c.leave(false, &err)
	return g.measure(c), nil
}

// measure returns the group's model, measured on c's device the first time
// (internal/tuning: Shared.MeasureOnce).
func (g *Group) measure(c *Comm) *costModel {
	if g.model.Done() {
		return &g.model
	}
	set := tuning.Setup{Dev: c.dev, SlotBytes: g.slotBytes, Links: linkPathOf(g), CPU: g.bk == "host", Timeout: g.cfg.CommunicationTimeout, Log: g.log, Rank: c.rank}
	if p := g.opts.parent; p != nil {
		// A sub-group (Split) runs on its parent's devices: the parent's
		// model, measured once for both (on this rank's device).
		set.Parent = func() *tuning.Shared { return &p.measure(c).Shared }
	}
	g.model.MeasureOnce(set)
	return &g.model
}

// predict is the model's time of strategy s (+Inf for Auto).
func (m *costModel) predict(s Strategy, dt backend.DType, bytes, n, depth, local int) float64 {
	a, ok := tuningAlgo[s]
	if !ok {
		return math.Inf(1)
	}
	return m.Predict(a, dt, bytes, n, depth, local)
}

var tuningAlgo = map[Strategy]tuning.Algo{Direct: tuning.Direct, Pipelined: tuning.Pipelined, Ring: tuning.Ring,
	Tree: tuning.Tree, Hierarchical: tuning.Hierarchical, Host: tuning.Host}

// autoStrategy picks the strategy with the least modelled time. The first
// call of a group measures the device (a few hundred milliseconds at most,
// on the calling rank's device, while the other ranks' first calls wait for
// it; a sub-group made by Split takes over its parent's model, measured
// once for both); that time counts against the call's context.
//
// slices says the call's data are host slices (strategy Host applies).
func (c *Comm) autoStrategy(bytes int, dt backend.DType, slices bool) (Strategy, string) {
	g := c.g
	if g.n == 1 { // nothing moves: no model to measure or ask per call
		return Direct, "one rank"
	}
	if c.noKernels(dt) {
		return Direct, dt.String() + " reduced on the host (a device has no " + dt.String() + " kernels)"
	}
	if g.tr != nil { // 2 processes or more
		if g.nl > 1 {
			return Hierarchical, "spans processes: reduce inside each process, ring between processes"
		}
		return Ring, "spans processes"
	}
	m := g.measure(c)
	if m.Err != nil {
		return Ring, fmt.Sprintf("cost model unavailable (%v)", m.Err)
	}
	best, bestT := Direct, math.Inf(1)
	for _, s := range autoCandidates {
		if s == Host && !slices {
			continue
		}
		if t := m.predict(s, dt, bytes, g.n, g.cfg.PipelineDepth, g.cfg.LocalGroupSize); t < bestT {
			best, bestT = s, t
		}
	}
	if best == Host {
		return best, "cost model: the CPU reduction is faster than any device path"
	}
	return best, "cost model"
}

// allReduceStrategy returns the strategy of d, an all-reduce of bytes
// bytes, and why: d's own, else the group's configured one, else Auto's
// choice (Direct where ranks sharing device memory reduce a tensor); a
// tensor runs Host as Direct.
func (c *Comm) allReduceStrategy(d *desc, bytes int) (Strategy, string) {
	s := d.strategy
	if s == Auto {
		s = c.g.cfg.Strategy
	}
	// Auto weighs Native only where the transport offers it: the refusal's
	// reason is a string made per call.
	if s == Native || (s == Auto && c.g.nc != nil && !d.tensor) {
		why := c.nativeRefusal(d, bytes/d.dt.Size())
		if why == "" {
			return Native, "spans processes over a transport with native collectives"
		}
		if s == Native {
			s, r := c.allReduceOther(d, bytes, Auto)
			return s, "native: " + why + "; " + r
		}
	}
	return c.allReduceOther(d, bytes, s)
}

// allReduceOther is allReduceStrategy once s (the call's or the group's
// strategy) is not Native.
func (c *Comm) allReduceOther(d *desc, bytes int, s Strategy) (Strategy, string) {
	switch {
	case s == Host && d.tensor:
		return Direct, "host reduction applies to host slices: direct on the device"
	case s != Auto:
		return s, "configured"
	case d.tensor && c.g.sharedMem:
		return Direct, "the ranks share device memory"
	}
	return c.autoStrategy(bytes, d.dt, !d.tensor)
}

// AutoChoice returns the strategy Auto picks for an all-reduce of bytes
// bytes of dt in c's group, and the cost model's time for each strategy
// (none where the model could not be measured), with the model measured, if
// it is not yet, as an operation of c: call it from c's goroutine, or inside
// a function queued with c.Go once the model exists (while c is in use the
// measurement fails over to Ring). The model is the group's (one
// measurement, shared by its ranks), so every rank of one process gets the
// same answer; across processes Auto does not use the model (the choice is
// the same on every rank, the modelled times are each process's own).
func (c *Comm) AutoChoice(bytes int, dt backend.DType) (Strategy, map[Strategy]time.Duration) {
	g := c.g
	out := map[Strategy]time.Duration{}
	m := &g.model
	if !m.Done() {
		var err error
		if m, err = g.measureOn(c); err != nil {
			return Ring, out
		}
	}
	s, _ := c.autoStrategy(bytes, dt, true)
	if m.Err == nil {
		for _, st := range autoCandidates {
			t := m.predict(st, dt, bytes, g.n, g.cfg.PipelineDepth, g.cfg.LocalGroupSize)
			if !math.IsInf(t, 0) {
				out[st] = time.Duration(t * 1e9)
			}
		}
	}
	return s, out
}
