package host

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// TestChunkedMatchesSerial: the device's Reduce (out of place and in place
// on its first source), ReduceMulti, Scale and Copy give the same bytes in
// chunks on the worker pool as on the device's worker alone
// (parreduce.Device capped at 1), for every type, op and scale, random
// bits (NaNs, infinities, subnormals and signed zeros among them), 1 to 9
// sources and counts around the chunk boundaries (chunks shrunk to 64
// bytes).
func TestChunkedMatchesSerial(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	defer func(b int) { chunkBytes = b }(chunkBytes)
	chunkBytes = 64
	defer parreduce.Device.Set(parreduce.Device.Set(0))
	d, err := Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for dt := range backend.DType(backend.NumDTypes) {
		es := dt.Size()
		c := chunkBytes / es
		for op := range backend.Op(backend.NumOps) {
			if !op.Defined(dt) {
				continue
			}
			for _, cnt := range []int{1, c - 1, c, c + 1, 2*c + 1, 4*c + 3, 37*c + 5} {
				k := 1 + rng.IntN(9)
				scales := []float64{1, 1 / float64(k)}
				if !dt.IsInt() {
					scales = append(scales, 0.3)
				}
				scale := scales[rng.IntN(len(scales))]
				src := make([]byte, k*cnt*es)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				var got [2][2][]byte // [serial, chunked][inputs, outputs]
				for m, limit := range []int{1, []int{0, 2, 3}[rng.IntN(3)]} {
					parreduce.Device.Set(limit)
					in, out, err := runCommands(d, op, dt, src, k, cnt, scale)
					if err != nil {
						t.Fatalf("%v %v k=%d cnt=%d: %v", dt, op, k, cnt, err)
					}
					got[m] = [2][]byte{in, out}
				}
				for w, what := range []string{"in place", "out of place, multi, scale and copy"} {
					if !bytes.Equal(got[0][w], got[1][w]) {
						t.Fatalf("seed %d: %v %v k=%d cnt=%d scale %v: %s: chunked differs from serial", seed, dt, op, k, cnt, scale, what)
					}
				}
			}
		}
	}
}

// runCommands writes src (k inputs of cnt elements) to a buffer and runs
// on d: a Reduce of the inputs into out's region 0, a ReduceMulti into
// regions 1 and 2, a Scale of input 0 into region 3, a Copy of it into
// region 4, then a Reduce in place into input 0. It returns the inputs'
// and the outputs' bytes.
func runCommands(d *Device, op backend.Op, dt backend.DType, src []byte, k, cnt int, scale float64) (in, out []byte, err error) {
	n := cnt * dt.Size()
	ib, err := d.Alloc(len(src), backend.HostVisible)
	if err != nil {
		return nil, nil, err
	}
	defer ib.Close()
	ob, err := d.Alloc(5*n, backend.HostVisible)
	if err != nil {
		return nil, nil, err
	}
	defer ob.Close()
	if err := ib.Write(0, src); err != nil {
		return nil, nil, err
	}
	if err := ob.Write(0, make([]byte, 5*n)); err != nil {
		return nil, nil, err
	}
	srcs := make([]backend.Region, k)
	for p := range srcs {
		srcs[p] = backend.Region{Buf: ib, Off: p * n, Len: n}
	}
	o := func(i int) backend.Region { return backend.Region{Buf: ob, Off: i * n, Len: n} }
	st := d.Stream()
	for _, rec := range []func() error{
		func() error { return st.Reduce(op, dt, o(0), srcs, scale) },
		func() error {
			return st.(backend.MultiReducer).ReduceMulti(op, dt, []backend.Region{o(1), o(2)}, srcs, scale)
		},
		func() error { return st.Scale(dt, o(3), srcs[0], scale) },
		func() error { return st.Copy(o(4), srcs[0]) },
		func() error { return st.Reduce(op, dt, srcs[0], srcs, scale) },
	} {
		if err := rec(); err != nil {
			return nil, nil, err
		}
	}
	f, err := st.Submit()
	if err != nil {
		return nil, nil, err
	}
	if err := f.Wait(context.Background()); err != nil {
		return nil, nil, err
	}
	in, out = make([]byte, len(src)), make([]byte, 5*n)
	if err := ib.Read(0, in); err != nil {
		return nil, nil, err
	}
	if err := ob.Read(0, out); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// TestChunkedAllocs: a Reduce of 1 MiB inputs, run in chunks on the pool,
// allocates nothing once warm (recording, submission, execution, wait).
func TestChunkedAllocs(t *testing.T) {
	const n = 1 << 20
	d, err := Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var regs [3]backend.Region
	for i := range regs {
		b, err := d.Alloc(n, backend.DeviceLocal)
		if err != nil {
			t.Fatal(err)
		}
		regs[i] = backend.Region{Buf: b, Len: n}
	}
	st := d.Stream()
	srcs := regs[1:]
	var stepErr error
	step := func() {
		if err := st.Reduce(backend.Sum, backend.F32, regs[0], srcs, 0.5); err != nil {
			stepErr = err
			return
		}
		f, err := st.Submit()
		if err == nil {
			err = f.Wait(context.Background())
		}
		if err != nil {
			stepErr = err
		}
	}
	step()
	if a := testing.AllocsPerRun(20, step); a != 0 {
		t.Errorf("a chunked Reduce: %v allocations per step, want 0", a)
	}
	if stepErr != nil {
		t.Fatal(fmt.Errorf("step: %w", stepErr))
	}
}
