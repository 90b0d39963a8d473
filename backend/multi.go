package backend

// MultiReducer is implemented by Streams that reduce into several
// destinations in one pass.
type MultiReducer interface {
	// ReduceMulti records dsts[j][i] = op(srcs[0][i], srcs[1][i], ...) * scale
	// for every j and i: the same semantics, order and rounding as
	// Stream.Reduce (sources reduced in order; scale applied only when != 1;
	// a scale of exactly 1/N divides by N correctly rounded; IEEE 754-2019
	// max/min: NaN wins, -0 < +0), bitwise the result Reduce gives. All
	// regions hold the same number of elements of dt. A destination may be
	// the same region as a source (in place: every element is read before it
	// is written), never a partial overlap; the destinations are distinct.
	// Regions may belong to other devices that share memory with this one
	// (SharesMemory).
	ReduceMulti(op Op, dt DType, dsts []Region, srcs []Region, scale float64) error
}
