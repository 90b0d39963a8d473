package fpwire

import (
	"math"
	"testing"
)

// TestRoundTrip: every field comes back as Put wrote it, extremes
// included, and Put allocates nothing.
func TestRoundTrip(t *testing.T) {
	b := make([]byte, Size)
	for _, r := range []Record{
		{},
		{Kind: 255, Op: 1, DT: 2, Strategy: 3, Path: 4, NoF64: true, Flag: true, LocalMismatch: true, Root: -1, Count: math.MaxInt64},
		{Kind: 7, Root: math.MaxInt32, Count: math.MinInt64, Flag: true},
	} {
		for i := range b {
			b[i] = 0xAA
		}
		r.Put(b)
		if got := Get(b); got != r {
			t.Errorf("Get(Put(%+v)) = %+v", r, got)
		}
	}
	r := Record{Kind: 1, Count: 5}
	if n := testing.AllocsPerRun(100, func() { r.Put(b) }); n != 0 {
		t.Errorf("Put: %v allocations", n)
	}
}
