package direct

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Prefix is the prefix reduction a Scan exchange computes.
type Prefix uint8

const (
	// Inclusive: rank r's output is the inputs of ranks 0..r (MPI_Scan).
	Inclusive Prefix = iota + 1
	// Exclusive: rank r's output is the inputs of ranks 0..r-1
	// (MPI_Exscan); rank 0's output is not written.
	Exclusive
)

// prefixLen returns how many ranks' inputs rank q's output reduces.
func (p Prefix) prefixLen(q int) int {
	if p == Exclusive {
		return q
	}
	return q + 1
}

// Scan is the prefix reduction through host memory (k.Prefix; k.Scale,
// Depth and Host unused): as in Staged, the rank takes its slice of the
// elements, gathers that slice of the inputs of the ranks some output
// needs (0..N-1; Exclusive: 0..N-2) into slots of its host-visible
// buffer, computes every prefix of the slots on its device in rank order,
// and copies prefix q (or q-1) into rank q's output. Every input and
// output element crosses between host memory and a device buffer once,
// spread over the ranks' devices, as in the direct all-reduce; gathering
// every input on every rank would move N times as much, and a chain of the
// running prefix from rank to rank would take N-1 steps one after another.
//
// The prefixes are the reduce kernels' results, bit for bit those of one
// kernel over slots 0..L-1: where every step of a kernel's reduction is
// rounded to the element type (32- and 64-bit floats, every integer; the
// extrema of every type, which round nothing) a chain in place, slot p =
// op(slot p-1, slot p), the kernel's own order of operations, one kernel
// of two sources per prefix; a sum or product of 16- and 8-bit floats,
// which a kernel accumulates in float32 and rounds once, one kernel per
// prefix over all its slots instead, from the longest down, each writing
// the last slot it read (no later prefix reads it). In place is safe as in Staged: the rank writes only its slice
// of each output, after it has read its slice of every input. The caller
// handles failures.
func (x *Exchange) Scan(ctx context.Context, r Rank, k *Call) error {
	lo, cnt := k.slice()
	ranks := len(k.Sends)
	slots := k.Prefix.prefixLen(ranks - 1) // the longest prefix
	if cnt == 0 || slots == 0 {
		return nil
	}
	es := k.DT.Size()
	a, b := lo*es, (lo+cnt)*es
	// Slots on 16-byte boundaries, so kernels can use 16-byte accesses.
	stride := (cnt*es + 15) &^ 15
	gather, err := r.Buffer(Gather, slots*stride)
	if err != nil {
		return err
	}
	for p := range slots {
		r.CopyIn(gather, p*stride, k.Sends[p][a:b])
	}
	if err := r.CopyWait(); err != nil {
		return err
	}
	if slots > 1 {
		if err := x.prefixes(r.Stream(), k, gather, slots, stride, cnt*es); err != nil {
			return err
		}
		f, err := r.Submit()
		if err != nil {
			return err
		}
		if err := r.Wait(ctx, f); err != nil {
			return err
		}
		if err := r.Broken(); err != nil {
			return err
		}
	}
	for q := range ranks {
		if L := k.Prefix.prefixLen(q); L > 0 {
			r.CopyOut(gather, (L-1)*stride, k.Recvs[q][a:b])
		}
	}
	return r.CopyWait()
}

// prefixes records the reductions that leave in slot L-1 of gather the
// reduction of slots 0..L-1, for L = 2..slots (Scan's doc says how).
func (x *Exchange) prefixes(s backend.Stream, k *Call, gather backend.Buffer, slots, stride, n int) error {
	slot := func(p int) backend.Region { return backend.Region{Buf: gather, Off: p * stride, Len: n} }
	srcs, _ := x.regions(slots)
	if Chained(k.DT, k.Op) {
		for p := 1; p < slots; p++ {
			srcs[0], srcs[1] = slot(p-1), slot(p)
			if err := s.Reduce(k.Op, k.DT, srcs[1], srcs[:2], 1); err != nil {
				return err
			}
		}
		return nil
	}
	for L := slots; L >= 2; L-- {
		for p := range L {
			srcs[p] = slot(p)
		}
		if err := s.Reduce(k.Op, k.DT, srcs[L-1], srcs[:L], 1); err != nil {
			return err
		}
	}
	return nil
}

// ScanZeroCopy is Scan without a host copy, for host memory every rank's
// device imported (pinned buffers): the rank's kernels read its slice of
// the inputs straight from host memory, its running prefix stays in its
// device memory (Work: two slices, the prefix of ranks 0..q-1 read while
// that of 0..q is written), and each prefix is copied from there into its
// slice of the outputs; every input element crosses to the device once
// and every output element back once. Rank q's input is read (into the
// prefix of 0..q) before rank q's output is written, so in place is safe.
// It takes the chain of Scan (one two-source kernel per prefix) and so
// only the types and ops whose every step rounds to the type (Chained);
// it reports ok false, having done nothing, where a rank's output
// overlaps another output or an input other than its own in place. The
// caller handles failures.
func (x *Exchange) ScanZeroCopy(ctx context.Context, r Rank, k *Call) (ok bool, err error) {
	lo, cnt := k.slice()
	ranks := len(k.Sends)
	slots := k.Prefix.prefixLen(ranks - 1)
	if cnt == 0 || slots == 0 {
		return true, nil
	}
	es := k.DT.Size()
	a, b := lo*es, (lo+cnt)*es
	srcs, dsts := x.regions(ranks)
	for p := range ranks {
		var imported bool
		if srcs[p], imported, err = r.Import(k.Sends[p][a:b]); !imported {
			return false, importFailed(p, err)
		}
		if dsts[p], imported, err = r.Import(k.Recvs[p][a:b]); !imported {
			return false, importFailed(p, err)
		}
	}
	for q, d := range dsts {
		if k.Prefix.prefixLen(q) == 0 {
			continue
		}
		for p, s := range srcs {
			if overlaps(d, s) && (p != q || d != s) {
				return false, nil
			}
		}
		for _, o := range dsts[:q] {
			if overlaps(d, o) {
				return false, nil
			}
		}
	}
	n := cnt * es
	work, err := r.Buffer(Work, 2*n)
	if err != nil {
		return false, err
	}
	s := r.Stream()
	pre := srcs[0] // the prefix of ranks 0..q
	var prev backend.Region
	pair := x.pair[:] // the Exchange's: a local array would escape into Reduce
	for q := range ranks {
		prev = pre
		if q > 0 && q < slots {
			pair[0], pair[1] = pre, srcs[q]
			pre = backend.Region{Buf: work, Off: q % 2 * n, Len: n}
			if err := s.Reduce(k.Op, k.DT, pre, pair, 1); err != nil {
				return false, err
			}
		}
		from := pre
		switch k.Prefix.prefixLen(q) {
		case 0:
			continue
		case q:
			from = prev // Exclusive: the prefix of ranks 0..q-1
		}
		if from != dsts[q] {
			if err := s.Copy(dsts[q], from); err != nil {
				return false, err
			}
		}
	}
	f, err := r.Submit()
	if err != nil {
		return false, err
	}
	return true, r.Wait(ctx, f)
}

// Chained reports whether Scan's prefixes of dt and op are a chain of
// two-source kernels (ScanZeroCopy takes only those).
func Chained(dt backend.DType, op backend.Op) bool {
	return !dt.IsNarrowFloat() || op == backend.Max || op == backend.Min
}

// overlaps reports whether two regions share a byte.
func overlaps(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}

// ScanAny is ScanZeroCopy where every rank's send and recv are host memory
// its device imported (zc) and the prefixes a chain of kernels, else Scan.
func (x *Exchange) ScanAny(ctx context.Context, r Rank, k *Call, zc bool) error {
	if zc {
		if done, err := x.ScanZeroCopy(ctx, r, k); done || err != nil {
			return err
		}
	}
	return x.Scan(ctx, r, k)
}
