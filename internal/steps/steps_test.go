package steps_test

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/channel"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/steps"
)

const slotBytes = 64 // 16 float32s a message: the test buffers take several

// waiter blocks on a link's channels (the test's deadline ends a hang).
type waiter struct{}

func (waiter) Message(ctx context.Context, ch <-chan channel.Msg, peer int, phase string) (channel.Msg, error) {
	return <-ch, nil
}

func (waiter) Credit(ctx context.Context, ch <-chan int, peer int, phase string) (int, error) {
	return <-ch, nil
}

func (waiter) Request(ctx context.Context, r backend.Request, peer int, phase string, stage *[]byte) error {
	panic("no transport")
}
func (waiter) Fail(err error)          {}
func (waiter) Mismatch(peer int) error { panic("mismatched message") }

// rank is one rank of a test group: a host device, shared links to every
// other rank, an inbox of one slot per rank (two for the compressed
// reductions' unpacked copies).
type rank struct {
	me    int
	dev   backend.Device
	links map[[2]int]*channel.Link
	inbox backend.Buffer
	held  []channel.Held
	fails int
}

func (r *rank) end() channel.End { return channel.End{Dev: r.dev, W: waiter{}} }

func (r *rank) Take(ctx context.Context, from, idx, n int) (backend.Region, error) {
	reg, h, err := r.links[[2]int{from, r.me}].Take(ctx, r.end(), r.inbox, idx, 1, n)
	if h != (channel.Held{}) {
		r.held = append(r.held, h)
	}
	return reg, err
}

func (r *rank) Reserve(ctx context.Context, to, n int) (int, backend.Region, error) {
	return r.links[[2]int{r.me, to}].Reserve(ctx, r.end(), n)
}

func (r *rank) Post(to, slot, n int) { r.links[[2]int{r.me, to}].Post(r.end(), slot, n, 1) }

func (r *rank) Flush(ctx context.Context) error {
	f, err := r.dev.Stream().Submit()
	if err == nil {
		err = f.Wait(ctx)
	}
	for _, h := range r.held {
		h.Release()
	}
	r.held = r.held[:0]
	return err
}

func (r *rank) Fail(err error) error {
	r.fails++
	return err
}

// group runs fn on n ranks at once, each over a buffer holding in[rank],
// and returns each rank's buffer afterwards.
func group(t *testing.T, dt backend.DType, op backend.Op, scale float64, in [][]byte, fn func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, elems int) error) [][]byte {
	t.Helper()
	n := len(in)
	links := map[[2]int]*channel.Link{}
	noop := func() {}
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a != b {
				links[[2]int{a, b}] = channel.NewShared(a, b, slotBytes, noop, noop)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for me := range in {
		dev, err := host.Open(backend.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		work, err := dev.Alloc(len(in[me]), backend.DeviceLocal)
		if err != nil {
			t.Fatal(err)
		}
		inbox, err := dev.Alloc(2*n*slotBytes, backend.HostVisible)
		if err != nil {
			t.Fatal(err)
		}
		if err := work.Write(0, in[me]); err != nil {
			t.Fatal(err)
		}
		r := &rank{me: me, dev: dev, links: links, inbox: inbox}
		s := &steps.Steps{R: r, Self: me, SlotBytes: slotBytes, Dev: dev, Inbox: inbox}
		x := &steps.Exchange{}
		s.Use(steps.Call{DT: dt, ES: dt.Size(), Op: op, Scale: scale, Work: work, Base: 0, Kernels: true}, x)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[me] = fn(ctx, &algo.Rank{S: s}, s, x, len(in[me])/dt.Size())
			out[me] = make([]byte, len(in[me]))
			if err := work.Read(0, out[me]); err != nil && errs[me] == nil {
				errs[me] = err
			}
			if r.fails != 0 && errs[me] == nil {
				t.Errorf("rank %d: %d failures reported, none returned", me, r.fails)
			}
		}()
	}
	wg.Wait()
	for me, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", me, err)
		}
	}
	return out
}

func f32s(v []float32) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

func fromF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	if _, err := binary.Decode(b, binary.LittleEndian, v); err != nil {
		panic(err)
	}
	return v
}

// inputs returns ranks inputs of n float32s: rank r's element i is
// r*1000 + i.
func inputs(ranks, n int) [][]byte {
	in := make([][]byte, ranks)
	for r := range in {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r*1000 + i)
		}
		in[r] = f32s(v)
	}
	return in
}

// The ring, tree and rank-ordered all-reduces over the steps, fused or not,
// sum (and average) every rank's buffer into every rank's.
func TestAllReduce(t *testing.T) {
	const ranks, n = 3, 100 // several messages per chunk, a short last chunk
	runs := map[string]func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error{
		"ring": func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error {
			return a.RingAllReduce(ctx, []int{0, 1, 2}, n)
		},
		"tree": func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error {
			return a.TreeAllReduce(ctx, []int{0, 1, 2}, n)
		},
		"ordered": func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error {
			chunk := algo.CeilDiv(n, ranks)
			if err := a.DetReduceScatter(ctx, []int{0, 1, 2}, n, chunk); err != nil {
				return err
			}
			lo, hi := algo.ChunkRange(n, chunk, s.Me())
			if err := s.Scale(ctx, lo, hi); err != nil {
				return err
			}
			return a.RingAllGather(ctx, []int{0, 1, 2}, n, chunk, 0)
		},
	}
	for name, run := range runs {
		for _, fuseOff := range []bool{false, true} {
			for _, mean := range []bool{false, true} {
				steps.FuseOff = fuseOff
				op, scale := backend.Sum, 1.0
				if mean {
					scale = 1.0 / ranks
				}
				out := group(t, backend.F32, op, scale, inputs(ranks, n), run)
				steps.FuseOff = false
				for r, b := range out {
					for i, got := range fromF32(b) {
						want := float32(3000+3*i) * float32(scale)
						if math.Abs(float64(got-want)) > 1e-3*math.Abs(float64(want)) {
							t.Fatalf("%s (fuse off %v, mean %v): rank %d element %d = %v, want %v", name, fuseOff, mean, r, i, got, want)
						}
					}
				}
			}
		}
	}
}

// A rank-ordered reduction of a 16-bit float type applies the mean's scale
// in its kernel: Scale then leaves the chunk as it is (it would round it a
// second time). A float32 chunk is scaled by Scale.
func TestOrderedScalesOnce(t *testing.T) {
	const ranks, n = 2, 40
	for _, dt := range []backend.DType{backend.Half, backend.F32} {
		in := make([][]byte, ranks)
		for r := range in {
			in[r] = make([]byte, n*dt.Size())
			for i := 0; i < n; i++ {
				if dt == backend.Half {
					binary.LittleEndian.PutUint16(in[r][2*i:], hostmath.F32ToF16(float32(i+r)))
				} else {
					binary.LittleEndian.PutUint32(in[r][4*i:], math.Float32bits(float32(i+r)))
				}
			}
		}
		out := group(t, dt, backend.Sum, 0.5, in, func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error {
			if err := a.DetReduceScatter(ctx, []int{0, 1}, n, n/ranks); err != nil {
				return err
			}
			lo, hi := algo.ChunkRange(n, n/ranks, s.Me())
			return s.Scale(ctx, lo, hi)
		})
		for r, b := range out {
			for i := r * n / ranks; i < (r+1)*n/ranks; i++ {
				var got float32
				if dt == backend.Half {
					got = hostmath.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
				} else {
					got = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
				}
				if want := float32(2*i+1) / 2; got != want {
					t.Fatalf("%v: rank %d element %d = %v, want %v (scaled once)", dt, r, i, got, want)
				}
			}
		}
	}
}

// The compressed ring all-reduce (a 16-bit wire format, ring or
// rank-ordered reduce-scatter) reduces in float32, rounds each owned chunk
// as the others receive it, and leaves every rank with the same bits,
// within the format's rounding of the exact sum.
func TestWireRing(t *testing.T) {
	const ranks, n = 3, 100
	for _, f := range []backend.WireFormat{backend.F16, backend.BF16} {
		for _, det := range []bool{false, true} {
			out := group(t, backend.F32, backend.Sum, 1, inputs(ranks, n), func(ctx context.Context, a *algo.Rank, s *steps.Steps, x *steps.Exchange, n int) error {
				x.Wire, x.Comp = f, s.Dev.Stream().(backend.Compressor)
				a.Det = det
				return a.RingAllReduce(ctx, []int{0, 1, 2}, n)
			})
			u := 0x1p-11
			if f == backend.BF16 {
				u = 0x1p-8
			}
			for r, b := range out {
				if string(b) != string(out[0]) {
					t.Fatalf("%v (deterministic %v): rank %d's result differs from rank 0's", f, det, r)
				}
			}
			for i, got := range fromF32(out[0]) {
				want := float64(3000 + 3*i)
				if math.Abs(float64(got)-want) > ranks*u*want {
					t.Fatalf("%v (deterministic %v): element %d = %v, want %v within the format's rounding", f, det, i, got, want)
				}
			}
		}
	}
}

func TestPackedLen(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 4, 2: 4, 3: 8, 16: 32} {
		if got := steps.PackedLen(n); got != want {
			t.Errorf("PackedLen(%d) = %d, want %d", n, got, want)
		}
	}
}
