// Package hooks connects collective to the packages built beside it (diag,
// ddp) without widening collective's exported API: collective fills the
// variables in its init, the others call them.
package hooks

import (
	"time"

	"github.com/gocoll/gocoll/backend"
)

// AutoChoice is collective's (*Comm).autoChoice: the strategy Auto picks
// for an all-reduce of bytes bytes of dt, and the modelled time of each
// strategy, measuring the group's cost model as an operation of comm (a
// *collective.Comm) if it has not been measured yet. Strategies are
// collective.Strategy values.
var AutoChoice func(comm any, bytes int, dt backend.DType) (int, map[int]time.Duration)
