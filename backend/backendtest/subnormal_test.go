package backendtest

import (
	"math"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestSubnormalCases: every hand-written case is what the host's arithmetic
// gives (refSubnormal), and a device that flushed subnormals (flushedRef)
// would get each one wrong, so each tells a flushing device.
func TestSubnormalCases(t *testing.T) {
	for _, c := range SubnormalCases {
		in := make([][]uint64, len(c.In))
		for j, v := range c.In {
			in[j] = []uint64{uint64(math.Float32bits(v))}
		}
		want := uint64(math.Float32bits(c.Want))
		if got := refSubnormal(backend.F32, c.Op, in, 0, c.Scale); got != want {
			t.Errorf("%v of %v scaled by %v: the host gives %#08x, the case says %#08x", c.Op, c.In, c.Scale, got, want)
		}
		if got := flushedRef(backend.F32, c.Op, in, 0, c.Scale); got == want {
			t.Errorf("%v of %v scaled by %v: flushing subnormals gives the same %#08x", c.Op, c.In, c.Scale, got)
		}
	}
}
