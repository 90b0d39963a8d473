// Package shareddev records a collective among ranks that share device
// memory (one process, one logical device or the host backend) as one
// submission on the leader's stream: device copies and rank-ordered reduce
// kernels that read every rank's published send region in place and write
// every rank's recv region; no slot, no host byte.
//
// Reductions run in rank order (srcs 0..N-1 in one kernel), as the
// deterministic algorithms do, so the result is bitwise what the other
// layouts give in deterministic mode.
//
// Overlaps: the in-place layouts the collectives allow (a recv that is the
// rank's own chunk of send, or send that is the rank's own chunk of recv)
// read and write each element in one step or copy a region onto itself,
// which is skipped. Any other overlap of a rank's send and recv is staged:
// the sends are first copied into a staging buffer (Plan.Staging bytes,
// the caller's) and read from there.
//
// The caller owns the protocol around the recording (the ranks publishing
// their regions, meeting, the leader submitting and signalling): this
// package only turns the published regions into recorded work.
package shareddev

import "github.com/gocoll/gocoll/backend"

// Kind is the collective a plan records.
type Kind uint8

const (
	AllReduce Kind = iota // in place in Send
	ReduceScatter
	AllGather
	Reduce
	Broadcast // in place in Send
	AllToAll
	Gather
	Scatter
	AllToAllV      // AllToAllV and AllGatherV: the ranges of SCounts, SDispls and RDispls
	ReduceScatterV // each rank's Recv the reduction of every rank's range SDispls[q][i]
	Scan           // rank q's Recv the reduction of the Sends of ranks 0..q
	Exscan         // rank q's Recv the reduction of the Sends of ranks 0..q-1; rank 0's not written
)

// Plan is one collective among N ranks sharing device memory, described by
// what each rank published.
type Plan struct {
	Kind   Kind
	DT     backend.DType
	Op     backend.Op
	Scale  float64 // the reduction's scale (1/N for a mean)
	M      int     // the chunk length in elements (the per-rank block)
	Root   int     // the root of Reduce, Broadcast, Gather and Scatter
	Leader int     // the recording rank (AllReduce without ReduceMulti reduces into its Send)

	// Send and Recv are each rank's regions (either may be empty where
	// the collective does not use it on that rank; AllReduce and
	// Broadcast use Send only).
	Send, Recv []backend.Region
	// SCounts[j][i] and SDispls[j][i] are the range rank j sends rank
	// i, RDispls[i][j] where it lands in rank i's Recv (the V kinds).
	SCounts, SDispls, RDispls [][]int

	// Sends and Srcs are the caller's scratch of N regions each.
	Sends, Srcs []backend.Region
}

// chunk returns elements [q*m, (q+1)*m) of r.
func (p *Plan) chunk(r backend.Region, q int) backend.Region {
	cb := p.M * p.DT.Size()
	return backend.Region{Buf: r.Buf, Off: r.Off + q*cb, Len: cb}
}

// at returns n elements of r from element off.
func (p *Plan) at(r backend.Region, off, n int) backend.Region {
	es := p.DT.Size()
	return backend.Region{Buf: r.Buf, Off: r.Off + off*es, Len: n * es}
}

// staged reports whether rank r's send must be staged: it overlaps its
// recv other than in an in-place layout the one-pass work handles.
func (p *Plan) staged(r int) bool {
	if p.Kind == AllReduce { // Send only: Recv is not published
		return false
	}
	s, d := p.Send[r], p.Recv[r]
	return s.Len > 0 && d.Len > 0 && Overlaps(s, d) && !p.safe(s, d, r)
}

// safe reports whether rank r's overlapping send s and recv d are an
// in-place layout the one-pass work of the plan's kind handles without
// staging (each element read and written by one step, or a region copied
// onto itself).
func (p *Plan) safe(s, d backend.Region, r int) bool {
	switch p.Kind {
	case ReduceScatter: // recv is the rank's chunk of send
		return d == p.chunk(s, r)
	case AllGather: // send is the rank's chunk of recv
		return s == p.chunk(d, r)
	case Reduce: // root reduces onto its send
		return r == p.Root && s == d
	case Gather:
		return r == p.Root && s == p.chunk(d, r)
	case Scatter:
		return r == p.Root && d == p.chunk(s, r)
	case Scan, Exscan: // each Recv written after every read of its Send (scan)
		return s == d
	}
	return false
}

// Staging returns the bytes of the staging buffer Record needs.
func (p *Plan) Staging() int {
	n := 0
	for r := range p.Send {
		if p.staged(r) {
			n += p.Send[r].Len
		}
	}
	return n
}

// Record records the plan on st: the staged sends copied into stage (at
// least Staging bytes; nil when none), then the collective. Nothing is
// recorded for a zero M. An error is the stream's.
func (p *Plan) Record(st backend.Stream, stage backend.Buffer) error {
	if p.M == 0 {
		return nil
	}
	if p.Kind == AllReduce {
		return p.allReduce(st)
	}
	sends := p.Sends
	copy(sends, p.Send)
	off := 0
	for r := range sends {
		if !p.staged(r) {
			continue
		}
		w := backend.Region{Buf: stage, Off: off, Len: sends[r].Len}
		if err := st.Copy(w, sends[r]); err != nil {
			return err
		}
		sends[r], off = w, off+w.Len
	}
	return p.record(st, sends, p.Recv)
}

// record records the collective from sends into recvs.
func (p *Plan) record(st backend.Stream, sends, recvs []backend.Region) error {
	N, srcs := len(sends), p.Srcs
	cp := func(dst, src backend.Region) error {
		if dst == src {
			return nil // in place
		}
		return st.Copy(dst, src)
	}
	switch p.Kind {
	case AllToAllV:
		// Rank j's range for rank i: scounts and sdispls of j, placed at
		// rdispls of i.
		for i := range N {
			for j := range N {
				if n := p.SCounts[j][i]; n > 0 {
					if err := cp(p.at(recvs[i], p.RDispls[i][j], n), p.at(sends[j], p.SDispls[j][i], n)); err != nil {
						return err
					}
				}
			}
		}
	case ReduceScatterV:
		// Rank i's recv is the rank-ordered reduction of every rank's
		// range for it.
		for i := range N {
			n := recvs[i].Len / p.DT.Size()
			if n == 0 {
				continue
			}
			for q := range N {
				srcs[q] = p.at(sends[q], p.SDispls[q][i], n)
			}
			if err := st.Reduce(p.Op, p.DT, recvs[i], srcs, p.Scale); err != nil {
				return err
			}
		}
	case ReduceScatter:
		for r := range N {
			for q := range N {
				srcs[q] = p.chunk(sends[q], r)
			}
			if err := st.Reduce(p.Op, p.DT, recvs[r], srcs, p.Scale); err != nil {
				return err
			}
		}
	case Reduce:
		return st.Reduce(p.Op, p.DT, recvs[p.Root], sends, p.Scale)
	case Scan, Exscan:
		return p.scan(st, sends, recvs)
	case AllGather:
		for r := range N {
			for q := range N {
				if err := cp(p.chunk(recvs[r], q), sends[q]); err != nil {
					return err
				}
			}
		}
	case Broadcast:
		for r := range N {
			if err := cp(sends[r], sends[p.Root]); err != nil {
				return err
			}
		}
	case AllToAll:
		for r := range N {
			for q := range N {
				if err := cp(p.chunk(recvs[r], q), p.chunk(sends[q], r)); err != nil {
					return err
				}
			}
		}
	case Gather:
		for q := range N {
			if err := cp(p.chunk(recvs[p.Root], q), sends[q]); err != nil {
				return err
			}
		}
	case Scatter:
		for r := range N {
			if err := cp(recvs[r], p.chunk(sends[p.Root], r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// scan records the prefix reductions: rank q's Recv is the Sends of ranks
// 0..q (Exscan: 0..q-1) reduced in rank order by one kernel (Scale
// unused), bit for bit the rank-ordered reduction of the other layouts
// (the kernels' arithmetic, rounded once), and a copy where the prefix is
// one rank's Send alone. The prefixes are recorded from the longest down,
// so a Recv that is its rank's Send (in place) is written after every
// longer prefix read that Send, and only the prefix being written reads it.
func (p *Plan) scan(st backend.Stream, sends, recvs []backend.Region) error {
	for q := len(sends) - 1; q >= 0; q-- {
		L := q + 1
		if p.Kind == Exscan {
			L = q
		}
		var err error
		switch {
		case L == 1 && recvs[q] != sends[0]:
			err = st.Copy(recvs[q], sends[0])
		case L > 1:
			err = st.Reduce(p.Op, p.DT, recvs[q], sends[:L], 1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// allReduce records the all-reduce in place: one pass that reads every
// rank's Send once and writes the result into every rank's
// (backend.MultiReducer), or, on a stream without it, every Send reduced
// into the leader's, then copied into every other rank's with a kernel
// (device copies run far below memory bandwidth on some GPUs).
func (p *Plan) allReduce(st backend.Stream) error {
	srcs := p.Srcs
	copy(srcs, p.Send)
	if m, ok := st.(backend.MultiReducer); ok {
		return m.ReduceMulti(p.Op, p.DT, p.Send, srcs, p.Scale)
	}
	own := p.Send[p.Leader]
	if err := st.Reduce(p.Op, p.DT, own, srcs, p.Scale); err != nil {
		return err
	}
	for q, r := range p.Send {
		if q == p.Leader {
			continue
		}
		if err := st.Scale(p.DT, r, own, 1); err != nil {
			return err
		}
	}
	return nil
}

// Overlaps reports whether two regions share a byte.
func Overlaps(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}
