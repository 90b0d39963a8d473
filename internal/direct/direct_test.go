package direct

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
)

// rank is a Rank over a host device of its own; Import maps any rank's
// memory to one imported buffer per allocation, as the ranks' import
// caches do.
type rank struct {
	dev     *host.Device
	bufs    [3]backend.Buffer
	mem     [][]byte // every rank's allocations
	imports []backend.Buffer
	broken  error
}

func (r *rank) Stream() backend.Stream { return r.dev.Stream() }

func (r *rank) Buffer(which, n int) (backend.Buffer, error) {
	if r.bufs[which] == nil || r.bufs[which].Len() < n {
		where := backend.HostVisible
		if which == Work {
			where = backend.DeviceLocal
		}
		b, err := r.dev.Alloc(n, where)
		if err != nil {
			return nil, err
		}
		r.bufs[which] = b
	}
	return r.bufs[which], nil
}

func (r *rank) CopyIn(buf backend.Buffer, off int, p []byte) {
	if err := buf.Write(off, p); err != nil {
		panic(err)
	}
}

func (r *rank) CopyOut(buf backend.Buffer, off int, p []byte) {
	if err := buf.Read(off, p); err != nil {
		panic(err)
	}
}

func (r *rank) CopyWait() error                { return nil }
func (r *rank) Submit() (backend.Fence, error) { return r.dev.Stream().Submit() }

func (r *rank) Wait(ctx context.Context, f backend.Fence) error { return f.Wait(ctx) }
func (r *rank) Broken() error                                   { return r.broken }

func (r *rank) Import(p []byte) (backend.Region, bool, error) {
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for i, m := range r.mem {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if at < base || at+uintptr(len(p)) > base+uintptr(len(m)) {
			continue
		}
		if r.imports[i] == nil {
			b, err := r.dev.Import(m)
			if err != nil {
				return backend.Region{}, false, err
			}
			r.imports[i] = b
		}
		return backend.Region{Buf: r.imports[i], Off: int(at - base), Len: len(p)}, true, nil
	}
	return backend.Region{}, false, nil
}

func f32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// TestExchange: every path (staged on the device or the CPU, zero-copy),
// in and out of place, at several depths, gives every rank the mean.
func TestExchange(t *testing.T) {
	const ranks, n = 3, 1003
	for _, zc := range []bool{false, true} {
		for _, cpu := range []string{"", "host", "cpu"} { // Call.Host, Call.CPU: the CPU pass
			for _, inPlace := range []bool{false, true} {
				for _, depth := range []int{1, 4} {
					if zc && cpu != "" {
						continue
					}
					name := fmt.Sprintf("zerocopy=%v/cpu=%v/inplace=%v/depth=%d", zc, cpu, inPlace, depth)
					t.Run(name, func(t *testing.T) { exchange(t, ranks, n, depth, zc, cpu, inPlace) })
				}
			}
		}
	}
}

func exchange(t *testing.T, ranks, n, depth int, zc bool, cpu string, inPlace bool) {
	sends, recvs := make([][]byte, ranks), make([][]byte, ranks)
	var mem [][]byte
	for p := range sends {
		sends[p] = make([]byte, 4*n)
		in := f32(sends[p])
		for i := range in {
			in[i] = float32(p*1000 + i)
		}
		recvs[p] = sends[p]
		mem = append(mem, sends[p])
		if !inPlace {
			recvs[p] = make([]byte, 4*n)
			mem = append(mem, recvs[p])
		}
	}
	want := make([]float32, n)
	for i := range want {
		for p := 0; p < ranks; p++ {
			want[i] += float32(p*1000 + i)
		}
		want[i] *= float32(1.0 / float64(ranks))
	}
	var wg sync.WaitGroup
	errs := make([]error, ranks)
	for me := 0; me < ranks; me++ {
		dev, err := host.Open(backend.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		r := &rank{dev: dev, mem: mem, imports: make([]backend.Buffer, len(mem))}
		k := &Call{DT: backend.F32, Op: backend.Sum, Scale: 1 / float64(ranks), N: n, Me: me, Sends: sends, Recvs: recvs, Depth: depth,
			Host: cpu == "host", CPU: cpu == "cpu"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var x Exchange
			if zc {
				errs[me] = x.ZeroCopy(context.Background(), r, k)
			} else {
				errs[me] = x.Staged(context.Background(), r, k)
			}
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", p, err)
		}
	}
	for p := range recvs {
		for i, x := range f32(recvs[p]) {
			if d := x - want[i]; d > 1e-3 || d < -1e-3 {
				t.Fatalf("rank %d element %d: got %v, want %v", p, i, x, want[i])
			}
		}
	}
}

// A broken group stops a staged exchange before it moves anything, on the
// device and in the CPU pass.
func TestStagedBroken(t *testing.T) {
	dev, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	stop := fmt.Errorf("broken")
	r := &rank{dev: dev, broken: stop}
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, cpu := range []bool{false, true} {
		out := make([]byte, 8)
		k := &Call{DT: backend.F32, Op: backend.Sum, Scale: 1, N: 2, Sends: [][]byte{data}, Recvs: [][]byte{out}, Depth: 1, CPU: cpu}
		var x Exchange
		if err := x.Staged(context.Background(), r, k); err != stop {
			t.Fatalf("Staged (CPU %v) on a broken group: %v, want %v", cpu, err, stop)
		}
		if string(out) != string(make([]byte, 8)) {
			t.Fatalf("Staged (CPU %v) on a broken group wrote %v", cpu, out)
		}
	}
}

// A failed import of a peer's memory names the peer.
func TestZeroCopyImportFailed(t *testing.T) {
	dev, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	r := &rank{dev: dev}
	data := make([]byte, 8)
	k := &Call{DT: backend.F32, Op: backend.Sum, Scale: 1, N: 2, Sends: [][]byte{data}, Recvs: [][]byte{data}, Depth: 1}
	var x Exchange
	err = x.ZeroCopy(context.Background(), r, k)
	if err == nil || err.Error() != "importing rank 0's pinned buffer: unsupported" {
		t.Fatalf("ZeroCopy without imports: %v", err)
	}
}

// multiSafe accepts in-place and disjoint regions and refuses overlaps that
// one ReduceMulti pass cannot write correctly.
func TestMultiSafe(t *testing.T) {
	a, b := backend.Buffer(nil), backend.Buffer(new(struct{ backend.Buffer }))
	r := func(buf backend.Buffer, off, n int) backend.Region { return backend.Region{Buf: buf, Off: off, Len: n} }
	cases := []struct {
		name       string
		dsts, srcs []backend.Region
		want       bool
	}{
		{"in place", []backend.Region{r(a, 0, 8), r(a, 8, 8)}, []backend.Region{r(a, 0, 8), r(a, 8, 8)}, true},
		{"out of place", []backend.Region{r(a, 0, 8), r(a, 8, 8)}, []backend.Region{r(b, 0, 8), r(b, 8, 8)}, true},
		{"same offsets, other buffers", []backend.Region{r(a, 0, 8)}, []backend.Region{r(b, 0, 8)}, true},
		{"destinations overlap", []backend.Region{r(a, 0, 8), r(a, 4, 8)}, []backend.Region{r(b, 0, 8), r(b, 8, 8)}, false},
		{"source partly over a destination", []backend.Region{r(a, 0, 8), r(a, 8, 8)}, []backend.Region{r(a, 4, 8), r(b, 0, 8)}, false},
		{"source over another rank's destination", []backend.Region{r(a, 0, 8), r(a, 8, 8)}, []backend.Region{r(a, 8, 8), r(a, 0, 8)}, true},
	}
	for _, tc := range cases {
		if got := multiSafe(tc.dsts, tc.srcs); got != tc.want {
			t.Errorf("%s: multiSafe = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// disjointOrSame accepts outputs that are pairwise disjoint and inputs that
// are an output exactly or apart from all of them, and refuses the rest.
func TestDisjointOrSame(t *testing.T) {
	m := make([]byte, 64)
	cases := []struct {
		outs, ins [][]byte
		ok        bool
	}{
		{[][]byte{m[0:8], m[8:16]}, [][]byte{m[16:24], m[24:32]}, true},
		{[][]byte{m[0:8], m[8:16]}, [][]byte{m[0:8], m[8:16]}, true}, // in place
		{[][]byte{m[0:8], m[4:12]}, [][]byte{m[16:24]}, false},       // outputs overlap
		{[][]byte{m[0:8]}, [][]byte{m[4:12]}, false},                 // an input shifted
		{[][]byte{m[0:8]}, [][]byte{m[0:4]}, false},                  // an input's head
		{[][]byte{m[8:16]}, [][]byte{m[0:8], m[16:24]}, true},        // adjacent
	}
	for i, c := range cases {
		if got := disjointOrSame(c.outs, c.ins); got != c.ok {
			t.Errorf("case %d: %v, want %v", i, got, c.ok)
		}
	}
}

// TestReduceScatter: every rank reduces its block of every rank's send into
// its recv, in rank order and scaled; out of place, in place (recv block r
// of rank r's send) and with recv overlapping its own block shifted by one
// element (the inputs copied first).
func TestReduceScatter(t *testing.T) {
	const ranks, cnt = 3, 1001
	for _, layout := range []string{"out", "in", "shifted"} {
		sends := make([][]byte, ranks)
		for p := range sends {
			sends[p] = make([]byte, 4*(ranks*cnt+1))
			for i := range ranks * cnt {
				f32(sends[p])[i] = float32(p*100000 + i)
			}
		}
		want := func(r, i int) float32 {
			var s float32
			for p := 0; p < ranks; p++ {
				s += float32(p*100000 + r*cnt + i)
			}
			return float32(float64(s) / ranks)
		}
		var wg sync.WaitGroup
		recvs := make([][]byte, ranks)
		for me := range ranks {
			a := me * cnt * 4
			switch layout {
			case "out":
				recvs[me] = make([]byte, 4*cnt)
			case "in":
				recvs[me] = sends[me][a : a+4*cnt]
			case "shifted":
				recvs[me] = sends[me][a+4 : a+4+4*cnt]
			}
		}
		// The shifted recv overlaps the next rank's block of its own send,
		// which that rank reads: there the ranks run one after the other,
		// the last first.
		for q := range ranks {
			me := q
			if layout == "shifted" {
				me = ranks - 1 - q
			}
			wg.Add(1)
			run := func() {
				defer wg.Done()
				var x Exchange
				x.ReduceScatter(backend.F32, backend.Sum, 1/float64(ranks), me, sends, recvs[me], cnt)
			}
			if layout == "shifted" {
				run()
			} else {
				go run()
			}
		}
		wg.Wait()
		for r := range ranks {
			for i, v := range f32(recvs[r])[:cnt] {
				if w := want(r, i); v != w {
					t.Fatalf("%s: rank %d element %d: %v, want %v", layout, r, i, v, w)
				}
			}
		}
	}
}

// TestAllGatherV: every rank's recv gets each rank's block at its place
// (gaps left alone, empty blocks skipped), out of place and in place (a
// rank's send its own block of its recv).
func TestAllGatherV(t *testing.T) {
	counts, displs := []int{3, 0, 5, 1}, []int{7, 0, 1, 11} // out of rank order, with gaps
	const n, es = 13, 4
	for _, inPlace := range []bool{false, true} {
		recvs, sends := make([][]byte, len(counts)), make([][]byte, len(counts))
		for p := range recvs {
			recvs[p] = make([]byte, n*es)
			for i := range recvs[p] {
				recvs[p][i] = 0xee
			}
		}
		for p := range sends {
			if inPlace {
				sends[p] = recvs[p][displs[p]*es:][:counts[p]*es]
			} else {
				sends[p] = make([]byte, counts[p]*es)
			}
			for i := range sends[p] {
				sends[p][i] = byte(p*16 + i)
			}
		}
		var wg sync.WaitGroup
		for me := range recvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				AllGatherV(me, sends, recvs[me], counts, displs, es)
			}()
		}
		wg.Wait()
		for r, recv := range recvs {
			want := make([]byte, n*es)
			for i := range want {
				want[i] = 0xee
			}
			for p := range counts {
				for i := range counts[p] * es {
					want[displs[p]*es+i] = byte(p*16 + i)
				}
			}
			if string(recv) != string(want) {
				t.Fatalf("in place %v: rank %d's recv %v, want %v", inPlace, r, recv, want)
			}
		}
	}
}
