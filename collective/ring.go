package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/steps"
)

// call carries one collective's parameters through the algorithms.
type call struct {
	dt    backend.DType
	es    int
	op    backend.Op
	scale float64 // applied once, by the rank that finishes a chunk's reduction
	work  backend.Buffer
	base  int // byte offset of element 0 in work
	// xc is the call's exchange state (internal/steps): its wire format
	// (wire.go), where its sends read, its rank-ordered reduction.
	xc steps.Exchange
}

func (k *call) region(lo, hi int) backend.Region {
	return backend.Region{Buf: k.work, Off: k.base + lo*k.es, Len: (hi - lo) * k.es}
}

// algo returns c's runner of the algorithms (internal/algo) over its
// exchange steps (internal/steps) for call k.
func (c *Comm) algo(k *call) *algo.Rank {
	s := &c.stp
	s.R, s.Self, s.SlotBytes, s.Dev, s.Inbox = (*stepRank)(c), c.rank, c.g.slotBytes, c.dev, c.inbox
	s.Use(steps.Call{DT: k.dt, ES: k.es, Op: k.op, Scale: k.scale, Work: k.work, Base: k.base,
		Kernels: !c.noKernels(k.dt), PCIeSlots: !c.g.sharedMem && !c.info.UnifiedMemory}, &k.xc)
	c.alg.S, c.alg.Det = s, c.g.cfg.Deterministic
	return &c.alg
}

// scaleOwned applies the final scale (mean) to the chunk [lo, hi) this
// rank owns, unless the reduction already did.
func (c *Comm) scaleOwned(ctx context.Context, k *call, lo, hi int) error {
	c.algo(k)
	return c.stp.Scale(ctx, lo, hi)
}
