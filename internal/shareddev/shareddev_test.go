package shareddev

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// mem is a buffer of float32s the fake stream computes on at once.
type mem struct{ b []byte }

func (m *mem) Len() int                      { return len(m.b) }
func (m *mem) Memory() backend.Memory        { return backend.DeviceLocal }
func (m *mem) Bytes() []byte                 { return nil }
func (m *mem) Write(off int, p []byte) error { copy(m.b[off:], p); return nil }
func (m *mem) Read(off int, p []byte) error  { copy(p, m.b[off:]); return nil }
func (m *mem) Close() error                  { return nil }

func newMem(vals ...float32) *mem {
	m := &mem{b: make([]byte, 4*len(vals))}
	for i, v := range vals {
		binary.LittleEndian.PutUint32(m.b[4*i:], math.Float32bits(v))
	}
	return m
}

func vals(r backend.Region) []float32 {
	b := r.Buf.(*mem).b[r.Off : r.Off+r.Len]
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func put(r backend.Region, v []float32) {
	b := r.Buf.(*mem).b[r.Off:]
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// stream runs each recorded F32 Sum at once and logs the kinds of step.
type stream struct{ log []string }

func (s *stream) Copy(dst, src backend.Region) error {
	if Overlaps(dst, src) {
		panic("Copy of overlapping regions")
	}
	s.log = append(s.log, "copy")
	put(dst, vals(src))
	return nil
}

func (s *stream) Reduce(op backend.Op, dt backend.DType, dst backend.Region, srcs []backend.Region, scale float64) error {
	s.log = append(s.log, "reduce")
	sum := make([]float32, dst.Len/4)
	for _, r := range srcs {
		for i, v := range vals(r) {
			sum[i] += v
		}
	}
	for i := range sum {
		sum[i] *= float32(scale)
	}
	put(dst, sum)
	return nil
}

func (s *stream) Scale(dt backend.DType, dst, src backend.Region, scale float64) error {
	s.log = append(s.log, "scale")
	put(dst, vals(src))
	return nil
}

func (s *stream) Submit() (backend.Fence, error) { return nil, nil }

// multi is a stream with ReduceMulti.
type multi struct{ stream }

func (s *multi) ReduceMulti(op backend.Op, dt backend.DType, dsts []backend.Region, srcs []backend.Region, scale float64) error {
	s.log = append(s.log, "multi")
	return nil
}

func whole(m *mem) backend.Region { return backend.Region{Buf: m, Len: m.Len()} }

func plan(kind Kind, m int, send, recv []backend.Region) *Plan {
	n := len(send)
	return &Plan{Kind: kind, DT: backend.F32, Op: backend.Sum, Scale: 1, M: m, Send: send, Recv: recv,
		Sends: make([]backend.Region, n), Srcs: make([]backend.Region, n)}
}

func TestAllGatherInPlaceSkipsOwnChunk(t *testing.T) {
	// Rank 0's send is its own chunk of its recv (in place); rank 1's is
	// apart.
	r0, s1, r1 := newMem(1, 0), newMem(2), newMem(0, 0)
	p := plan(AllGather, 1, []backend.Region{{Buf: r0, Len: 4}, whole(s1)}, []backend.Region{whole(r0), whole(r1)})
	if n := p.Staging(); n != 0 {
		t.Fatalf("Staging = %d, want 0 for the in-place layout", n)
	}
	var st stream
	if err := p.Record(&st, nil); err != nil {
		t.Fatal(err)
	}
	if got := len(st.log); got != 3 {
		t.Errorf("%d copies, want 3 (the in-place one skipped)", got)
	}
	for i, r := range []*mem{r0, r1} {
		if got := vals(whole(r)); !slices.Equal(got, []float32{1, 2}) {
			t.Errorf("rank %d recv %v, want [1 2]", i, got)
		}
	}
}

func TestReduceScatterStagesOverlap(t *testing.T) {
	// Rank 0's recv overlaps its send but is not its own chunk (chunk 1
	// where rank 0 owns chunk 0): the send is staged first.
	a, b := newMem(1, 2, 0), newMem(10, 20)
	send := []backend.Region{{Buf: a, Len: 8}, whole(b)}
	recv := []backend.Region{{Buf: a, Off: 4, Len: 4}, {Buf: b, Off: 4, Len: 4}}
	p := plan(ReduceScatter, 1, send, recv)
	if n := p.Staging(); n != 8 {
		t.Fatalf("Staging = %d, want rank 0's 8 bytes", n)
	}
	stage := newMem(0, 0)
	var st stream
	if err := p.Record(&st, stage); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.log, []string{"copy", "reduce", "reduce"}) {
		t.Errorf("steps %v, want a staging copy and two reductions", st.log)
	}
	if got := vals(recv[0]); got[0] != 11 {
		t.Errorf("rank 0 got %v, want [11]", got)
	}
	if got := vals(recv[1]); got[0] != 22 {
		t.Errorf("rank 1 got %v, want [22]", got)
	}
}

func TestAllToAllV(t *testing.T) {
	// Rank 0 sends [5] to rank 1 from offset 1; rank 1 sends [7 8] to rank
	// 0 from offset 0, landing at rank 0's offset 1.
	s0, s1 := newMem(4, 5), newMem(7, 8)
	r0, r1 := newMem(0, 0, 0), newMem(0)
	p := plan(AllToAllV, 1, []backend.Region{whole(s0), whole(s1)}, []backend.Region{whole(r0), whole(r1)})
	p.SCounts = [][]int{{0, 1}, {2, 0}}
	p.SDispls = [][]int{{0, 1}, {0, 0}}
	p.RDispls = [][]int{{0, 1}, {0, 0}}
	var st stream
	if err := p.Record(&st, nil); err != nil {
		t.Fatal(err)
	}
	if got := vals(whole(r0)); !slices.Equal(got, []float32{0, 7, 8}) {
		t.Errorf("rank 0 recv %v, want [0 7 8]", got)
	}
	if got := vals(whole(r1)); !slices.Equal(got, []float32{5}) {
		t.Errorf("rank 1 recv %v, want [5]", got)
	}
}

func TestAllReduce(t *testing.T) {
	a, b, c := newMem(1), newMem(2), newMem(4)
	send := []backend.Region{whole(a), whole(b), whole(c)}
	p := plan(AllReduce, 1, send, nil)
	var st stream
	if err := p.Record(&st, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.log, []string{"reduce", "scale", "scale"}) {
		t.Errorf("steps %v, want a reduction into the leader's and two copies out", st.log)
	}
	for i, r := range send {
		if got := vals(r); got[0] != 7 {
			t.Errorf("rank %d got %v, want [7]", i, got)
		}
	}
	var ms multi
	if err := p.Record(&ms, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ms.log, []string{"multi"}) {
		t.Errorf("steps %v with ReduceMulti, want one pass", ms.log)
	}
}

func TestZeroChunkRecordsNothing(t *testing.T) {
	a := newMem(1)
	for _, k := range []Kind{AllReduce, ReduceScatter, AllGather, Broadcast, Scatter} {
		p := plan(k, 0, []backend.Region{whole(a)}, []backend.Region{whole(a)})
		var st stream
		if err := p.Record(&st, nil); err != nil || len(st.log) != 0 {
			t.Errorf("kind %d: steps %v, err %v; want none", k, st.log, err)
		}
	}
}

// TestScanExscan: 4 ranks, ranks 1 and 3 in place: every prefix against a
// plain loop, Exscan's rank 0 recv untouched, nothing staged, one-rank
// prefixes copied.
func TestScanExscan(t *testing.T) {
	in := []float32{1, 2, 4, 8}
	for _, k := range []Kind{Scan, Exscan} {
		send, recv := make([]backend.Region, 4), make([]backend.Region, 4)
		for r := range send {
			send[r] = whole(newMem(in[r], 10*in[r]))
			recv[r] = whole(newMem(-1, -1))
			if r%2 == 1 {
				recv[r] = send[r]
			}
		}
		p := plan(k, 2, send, recv)
		if n := p.Staging(); n != 0 {
			t.Fatalf("kind %d: Staging = %d, want 0 (in place needs none)", k, n)
		}
		var st stream
		if err := p.Record(&st, nil); err != nil {
			t.Fatal(err)
		}
		copies := 0
		for _, s := range st.log {
			if s == "copy" {
				copies++
			}
		}
		if copies != 1 {
			t.Errorf("kind %d: steps %v, want one copy (the prefix of one rank)", k, st.log)
		}
		for r := range recv {
			L := r + 1
			if k == Exscan {
				L = r
			}
			want := []float32{-1, -1}
			if L > 0 {
				want = []float32{0, 0}
				for q := range L {
					want[0] += in[q]
					want[1] += 10 * in[q]
				}
			}
			if got := vals(recv[r]); !slices.Equal(got, want) {
				t.Errorf("kind %d: rank %d recv %v, want %v", k, r, got, want)
			}
		}
	}
}
