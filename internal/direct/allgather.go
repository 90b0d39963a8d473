package direct

import (
	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// AllGather is the one-process all-gather of host slices, rank me's part:
// every rank's send (sends[p], m bytes, published by the caller) copied by
// the CPU into block p of recv, starting after me so that the ranks read
// different sends at once; the rank's own block only where its send is not
// already there (in place). A rank reads the others' sends and writes only
// its own recv, so every rank runs it at the same time; no data needs a
// device.
func AllGather(me int, sends [][]byte, recv []byte, m int) {
	if m == 0 {
		return
	}
	for i := range sends {
		p := (me + 1 + i) % len(sends)
		if dst := recv[p*m : (p+1)*m]; &dst[0] != &sends[p][0] {
			hostmath.Copy(dst, sends[p][:m]) // over the worker pool from 1 MiB
		}
	}
}

// ReduceScatter is the one-process reduce-scatter of host slices on the
// CPU, rank me's part: block me (cnt elements of dt) of every rank's send
// (sends[p], published by the caller) reduced in rank order with the
// kernels' arithmetic (hostmath.ReduceMulti), scaled, into recv. A rank
// reads block me of every send and writes only its own recv, which may be
// block me of its own send (in place): no other rank reads that block.
// Where recv partly overlaps a block it reads, the blocks are copied into
// the exchange's scratch first (grown, never per call).
func (x *Exchange) ReduceScatter(dt backend.DType, op backend.Op, scale float64, me int, sends [][]byte, recv []byte, cnt int) {
	es := dt.Size()
	a, b := me*cnt*es, (me+1)*cnt*es
	x.ins, x.outs = x.ins[:0], append(x.outs[:0], recv[:b-a])
	for _, s := range sends {
		x.ins = append(x.ins, s[a:b])
	}
	if !disjointOrSame(x.outs, x.ins) {
		if len(x.scratch) < len(sends)*(b-a) {
			x.scratch = make([]byte, len(sends)*(b-a))
		}
		for p, in := range x.ins {
			x.ins[p] = x.scratch[p*(b-a) : (p+1)*(b-a)]
			copy(x.ins[p], in)
		}
	}
	hostmath.ReduceMulti(dt, op, x.outs, x.ins, cnt, scale)
	clear(x.ins) // hold no reference to the ranks' memory
	clear(x.outs)
}

// AllGatherV is AllGather with a block of its own size and place for each
// rank: counts[p] elements of es bytes of sends[p] copied into recv at
// element displs[p], starting after me; the rank's own block only where
// its send is not already there (in place).
func AllGatherV(me int, sends [][]byte, recv []byte, counts, displs []int, es int) {
	for i := range sends {
		p := (me + 1 + i) % len(sends)
		if n := counts[p] * es; n > 0 {
			if dst := recv[displs[p]*es:][:n]; &dst[0] != &sends[p][0] {
				hostmath.Copy(dst, sends[p][:n])
			}
		}
	}
}
