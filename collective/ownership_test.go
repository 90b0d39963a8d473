package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/pin"
)

// The ownership and aliasing rules of resolve.go, through the public API,
// for every form: Close of the memory racing a call ends in a defined
// outcome (waited and correct, ErrClosed, or the call's typed error; never a
// crash or nil with wrong data), and the overlap of a rank's own arguments
// is either an in-place layout (exact) or refused on every rank with the
// buffers untouched.

// ownM is the block length of the ownership tests; ownRanks ranks.
const (
	ownM     = 5
	ownRanks = 3
)

// sliceForm is one public form run on a rank's buffer b (4*N*m elements:
// send in [0, N*m), recv in [N*m, 2*N*m)), with the result it must leave on
// rank r when it returns nil (nil: not checked on that rank).
type sliceForm struct {
	name string
	run  func(ctx context.Context, c *Comm, b []float32) error
	want func(r, N, m int, b []float32) error
}

// ownInput is rank r's initial buffer: exact small integers.
func ownInput(r int, b []float32) {
	for i := range b {
		b[i] = 0
	}
	for i := 0; i < len(b)/2; i++ {
		b[i] = float32(r*1000 + i)
	}
}

func expectAt(b []float32, at int, want func(i int) float32, n int) error {
	for i := 0; i < n; i++ {
		if g, w := b[at+i], want(i); g != w {
			return fmt.Errorf("element %d: got %v, want %v", at+i, g, w)
		}
	}
	return nil
}

func sliceForms(N, m int) []sliceForm {
	nm := N * m
	sum := func(i int) float32 { // sum over ranks of q*1000 + i
		return float32(1000*N*(N-1)/2 + N*i)
	}
	send, recv := func(b []float32) []float32 { return b[:nm] }, func(b []float32) []float32 { return b[nm : 2*nm] }
	ring := func(c *Comm) (to, from int) { return (c.Rank() + 1) % N, (c.Rank() + N - 1) % N }
	eq := func() ([]int, []int) {
		cnt, dsp := make([]int, N), make([]int, N)
		for q := range cnt {
			cnt[q], dsp[q] = m, q*m
		}
		return cnt, dsp
	}
	allToAllWant := func(r, N, m int, b []float32) error {
		return expectAt(b, nm, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + r*m + j) }, nm)
	}
	gatherWant := func(r, N, m int, b []float32) error {
		return expectAt(b, nm, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + j) }, nm)
	}
	rsWant := func(r, N, m int, b []float32) error {
		return expectAt(b, nm, func(j int) float32 { return sum(r*m + j) }, m)
	}
	shiftWant := func(r, N, m int, b []float32) error {
		from := (r + N - 1) % N
		return expectAt(b, nm, func(i int) float32 { return float32(from*1000 + i) }, nm)
	}
	return []sliceForm{
		{"AllReduce", func(ctx context.Context, c *Comm, b []float32) error { return AllReduce(ctx, c, send(b), Sum) },
			func(r, N, m int, b []float32) error { return expectAt(b, 0, sum, nm) }},
		{"AllReduceInto", func(ctx context.Context, c *Comm, b []float32) error {
			return AllReduceInto(ctx, c, send(b), recv(b), Sum)
		},
			func(r, N, m int, b []float32) error { return expectAt(b, nm, sum, nm) }},
		{"AllReduceWith/direct", func(ctx context.Context, c *Comm, b []float32) error {
			return AllReduceWith(ctx, c, send(b), recv(b), Sum, Direct)
		}, func(r, N, m int, b []float32) error { return expectAt(b, nm, sum, nm) }},
		{"AllReduceWith/ring", func(ctx context.Context, c *Comm, b []float32) error {
			return AllReduceWith(ctx, c, send(b), recv(b), Sum, Ring)
		}, func(r, N, m int, b []float32) error { return expectAt(b, nm, sum, nm) }},
		{"ReduceScatter", func(ctx context.Context, c *Comm, b []float32) error {
			return ReduceScatter(ctx, c, send(b), recv(b)[:m], Sum)
		}, rsWant},
		{"AllGather", func(ctx context.Context, c *Comm, b []float32) error { return AllGather(ctx, c, send(b)[:m], recv(b)) }, gatherWant},
		{"Broadcast", func(ctx context.Context, c *Comm, b []float32) error { return Broadcast(ctx, c, send(b), 0) },
			func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { return float32(i) }, nm)
			}},
		{"Reduce", func(ctx context.Context, c *Comm, b []float32) error { return Reduce(ctx, c, send(b), recv(b), Sum, 1) },
			func(r, N, m int, b []float32) error {
				if r != 1 {
					return nil
				}
				return expectAt(b, nm, sum, nm)
			}},
		{"AllToAll", func(ctx context.Context, c *Comm, b []float32) error { return AllToAll(ctx, c, send(b), recv(b)) }, allToAllWant},
		{"AllToAllV", func(ctx context.Context, c *Comm, b []float32) error {
			cnt, dsp := eq()
			return AllToAllV(ctx, c, send(b), cnt, dsp, recv(b), cnt, dsp)
		}, allToAllWant},
		{"AllGatherV", func(ctx context.Context, c *Comm, b []float32) error {
			cnt, dsp := eq()
			return AllGatherV(ctx, c, send(b)[:m], recv(b), cnt, dsp)
		}, gatherWant},
		{"ReduceScatterV", func(ctx context.Context, c *Comm, b []float32) error {
			cnt, dsp := eq()
			return ReduceScatterV(ctx, c, send(b), recv(b)[:m], cnt, dsp, Sum)
		}, rsWant},
		{"Gather", func(ctx context.Context, c *Comm, b []float32) error { return Gather(ctx, c, send(b)[:m], recv(b), 1) },
			func(r, N, m int, b []float32) error {
				if r != 1 {
					return nil
				}
				return gatherWant(r, N, m, b)
			}},
		{"Scatter", func(ctx context.Context, c *Comm, b []float32) error { return Scatter(ctx, c, send(b), recv(b)[:m], 1) },
			func(r, N, m int, b []float32) error {
				return expectAt(b, nm, func(j int) float32 { return float32(1000 + r*m + j) }, m)
			}},
		{"SendRecv", func(ctx context.Context, c *Comm, b []float32) error {
			to, from := ring(c)
			return SendRecv(ctx, c, send(b), to, recv(b), from)
		}, shiftWant},
		{"Send/Recv", func(ctx context.Context, c *Comm, b []float32) error {
			to, from := ring(c)
			if c.Rank()%2 == 0 {
				if err := Send(ctx, c, send(b), to); err != nil {
					return err
				}
				return Recv(ctx, c, recv(b), from)
			}
			if err := Recv(ctx, c, recv(b), from); err != nil {
				return err
			}
			return Send(ctx, c, send(b), to)
		}, shiftWant},
		{"AllReduceAsync", func(ctx context.Context, c *Comm, b []float32) error {
			return AllReduceAsync(ctx, c, send(b), Sum).Wait(ctx)
		}, func(r, N, m int, b []float32) error { return expectAt(b, 0, sum, nm) }},
		{"BroadcastAsync", func(ctx context.Context, c *Comm, b []float32) error {
			return BroadcastAsync(ctx, c, send(b), 0).Wait(ctx)
		}, func(r, N, m int, b []float32) error {
			return expectAt(b, 0, func(i int) float32 { return float32(i) }, nm)
		}},
		{"SendAsync/RecvAsync", func(ctx context.Context, c *Comm, b []float32) error {
			to, from := ring(c)
			ws := SendAsync(ctx, c, send(b), to)
			wr := RecvAsync(ctx, c, recv(b), from)
			return errors.Join(ws.Wait(ctx), wr.Wait(ctx))
		}, shiftWant},
		{"Batch", func(ctx context.Context, c *Comm, b []float32) error {
			to, from := ring(c)
			bt := c.Batch()
			BatchSend(bt, send(b), to)
			BatchRecv(bt, recv(b), from)
			return bt.Run(ctx)
		}, shiftWant},
		{"Comm.Go", func(ctx context.Context, c *Comm, b []float32) error {
			s := send(b)
			return c.Go(ctx, "user step", func(ctx context.Context) error {
				return AllReduce(ctx, c, s, Sum)
			}, Mem(s)).Wait(ctx)
		}, func(r, N, m int, b []float32) error { return expectAt(b, 0, sum, nm) }},
	}
}

// checkOutcome asserts a defined outcome of a form on rank r: a typed
// *Error, or nil with the result the form promises (checked when the rank's
// memory is still readable).
func checkOutcome(t *testing.T, f sliceForm, r, N int, err error, b []float32, readable bool) {
	t.Helper()
	if msg := outcomeError(f, r, N, ownM, err, b, readable); msg != "" {
		t.Error(msg)
	}
}

// outcomeError describes an undefined outcome of form f on rank r ("" if
// it is defined).
func outcomeError(f sliceForm, r, N, m int, err error, b []float32, readable bool) string {
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return fmt.Sprintf("%s: rank %d: untyped error %T: %v", f.name, r, err, err)
		}
		return ""
	}
	if readable {
		if werr := f.want(r, N, m, b); werr != nil {
			return fmt.Sprintf("%s: rank %d: nil error with a wrong result: %v", f.name, r, werr)
		}
	}
	return ""
}

// TestCloseHostBufferRacesEveryForm closes rank 0's HostBuffer at a random
// moment while every rank runs a form on its own HostBuffer.
func TestCloseHostBufferRacesEveryForm(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			// A rank refused before a point-to-point call leaves its peer
			// waiting for it: keep that wait short.
			wait, tries := 2*time.Second, 2
			if bk == "host" {
				wait, tries = time.Second, 6
			}
			if testing.Short() || raceEnabled {
				tries = 1
			}
			short := func(o *Options) { o.Config.CommunicationTimeout = wait }
			g := openGroup(t, bk, ownRanks, short)
			N := g.Size()
			waited, refused := 0, 0
			defer func() { t.Logf("%d calls waited for, %d refused with ErrClosed", waited, refused) }()
			for _, f := range sliceForms(N, ownM) {
				for try := 0; try < tries; try++ {
					if g.Err() != nil {
						g = openGroup(t, bk, ownRanks, short)
					}
					hbs := make([]*HostBuffer[float32], N)
					bufs := make([][]float32, N)
					for r := range hbs {
						hb, err := NewHostBuffer[float32](4 * N * ownM)
						if err != nil {
							t.Fatal(err)
						}
						hbs[r], bufs[r] = hb, hb.Data
						ownInput(r, hb.Data)
					}
					// A quarter of the tries close before the calls start;
					// the rest at a random moment while they run.
					early := rng.IntN(4) == 0
					delay := time.Duration(rng.IntN(400)) * time.Microsecond
					var closeErr error
					var wg sync.WaitGroup
					if early {
						closeErr = hbs[0].Close()
					} else {
						wg.Add(1)
						go func() {
							defer wg.Done()
							time.Sleep(delay)
							closeErr = hbs[0].Close()
						}()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					errs := onRanks(g, func(c *Comm) error { return f.run(ctx, c, bufs[c.Rank()]) })
					cancel()
					wg.Wait()
					if closeErr != nil {
						t.Fatalf("%s: HostBuffer.Close: %v", f.name, closeErr)
					}
					for r := 0; r < N; r++ {
						checkOutcome(t, f, r, N, errs[r], bufs[r], r != 0)
					}
					if errs[0] == nil {
						waited++
					} else if errors.Is(errs[0], ErrClosed) {
						refused++
					}
					// A call after Close is refused on rank 0 without touching
					// the freed memory, and on every rank.
					if g.Err() == nil {
						errs = onRanks(g, func(c *Comm) error { return AllReduce(context.Background(), c, bufs[c.Rank()][:1], Sum) })
						if !errors.Is(errs[0], ErrClosed) {
							t.Fatalf("%s: AllReduce on a closed HostBuffer: %v, want ErrClosed", f.name, errs[0])
						}
						for r := 1; r < N; r++ {
							if !errors.Is(errs[r], ErrMismatch) {
								t.Fatalf("%s: rank %d beside a closed HostBuffer: %v, want ErrMismatch", f.name, r, errs[r])
							}
						}
					}
					for r := 1; r < N; r++ {
						hbs[r].Close()
					}
					if t.Failed() {
						return
					}
				}
			}
		})
	}
}

// aliasCase is one collective called with aliased arguments on every rank:
// the buffer b (4*N*m elements, rank r's values r*1000+i in the first half)
// is set up, run, and checked when the layout is supported.
type aliasCase struct {
	name string
	ok   bool // an in-place layout: exact; else refused on every rank
	run  func(ctx context.Context, c *Comm, b []float32) error
	want func(r, N, m int, b []float32) error
}

func aliasCases(N, m int) []aliasCase {
	nm := N * m
	sum := func(i int) float32 { return float32(1000*N*(N-1)/2 + N*i) }
	eq := func() ([]int, []int) {
		cnt, dsp := make([]int, N), make([]int, N)
		for q := range cnt {
			cnt[q], dsp[q] = m, q*m
		}
		return cnt, dsp
	}
	// Layout shifts: 0 is the in-place layout, 1 a partial overlap.
	var cs []aliasCase
	for _, sh := range []int{0, 1} {
		ok := sh == 0
		sfx := map[bool]string{true: "/in-place", false: "/overlap"}[ok]
		// The root's block moved back one element: it overlaps the other
		// buffer for every m (moved forward, a block of 1 could land
		// past its end).
		rsh := -sh
		cs = append(cs,
			aliasCase{"AllReduceInto" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				return AllReduceInto(ctx, c, b[:nm], b[sh:sh+nm], Sum)
			}, func(r, N, m int, b []float32) error { return expectAt(b, 0, sum, nm) }},
			aliasCase{"ReduceScatter" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				return ReduceScatter(ctx, c, b[:nm], b[r*m+sh:(r+1)*m+sh], Sum)
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, r*m, func(j int) float32 { return sum(r*m + j) }, m)
			}},
			aliasCase{"AllGather" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				return AllGather(ctx, c, b[r*m+sh:(r+1)*m+sh], b[:nm])
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + q*m + j) }, nm)
			}},
			aliasCase{"Reduce" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				return Reduce(ctx, c, b[:nm], b[sh:sh+nm], Sum, 1)
			}, func(r, N, m int, b []float32) error {
				if r != 1 {
					return nil
				}
				return expectAt(b, 0, sum, nm)
			}},
			aliasCase{"Gather" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				if r == 1 {
					return Gather(ctx, c, b[m+rsh:2*m+rsh], b[:nm], 1)
				}
				return Gather(ctx, c, b[r*m:(r+1)*m], nil, 1)
			}, func(r, N, m int, b []float32) error {
				if r != 1 {
					return nil
				}
				return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + q*m + j) }, nm)
			}},
			aliasCase{"Scatter" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				if r == 1 {
					return Scatter(ctx, c, b[:nm], b[m+rsh:2*m+rsh], 1)
				}
				return Scatter(ctx, c, nil, b[nm:nm+m], 1)
			}, func(r, N, m int, b []float32) error {
				at := nm
				if r == 1 {
					at = m
				}
				return expectAt(b, at, func(j int) float32 { return float32(1000 + r*m + j) }, m)
			}},
			aliasCase{"AllToAll" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				return AllToAll(ctx, c, b[:nm], b[sh:sh+nm])
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + r*m + j) }, nm)
			}},
			aliasCase{"AllToAllV" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				cnt, dsp := eq()
				return AllToAllV(ctx, c, b[:nm], cnt, dsp, b[sh:sh+nm], cnt, dsp)
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + r*m + j) }, nm)
			}},
			aliasCase{"AllGatherV" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				cnt, dsp := eq()
				return AllGatherV(ctx, c, b[r*m+sh:(r+1)*m+sh], b[:nm], cnt, dsp)
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + q*m + j) }, nm)
			}},
			aliasCase{"ReduceScatterV" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				r := c.Rank()
				cnt, dsp := eq()
				return ReduceScatterV(ctx, c, b[:nm], b[r*m+sh:(r+1)*m+sh], cnt, dsp, Sum)
			}, func(r, N, m int, b []float32) error {
				return expectAt(b, r*m, func(j int) float32 { return sum(r*m + j) }, m)
			}},
			aliasCase{"SendRecv" + sfx, ok, func(ctx context.Context, c *Comm, b []float32) error {
				to, from := (c.Rank()+1)%N, (c.Rank()+N-1)%N
				return SendRecv(ctx, c, b[:nm], to, b[sh:sh+nm], from)
			}, func(r, N, m int, b []float32) error {
				from := (r + N - 1) % N
				return expectAt(b, 0, func(i int) float32 { return float32(from*1000 + i) }, nm)
			}},
		)
	}
	return cs
}

// TestAliasingTable runs every collective with its in-place layouts
// (exact) and with a partial overlap of a rank's own arguments (refused
// with ErrInvalidArgument on every rank, buffers untouched), on plain
// slices and on HostBuffers. A collective's group stays usable; a refused
// point-to-point call (SendRecv) breaks the group naming itself, and the
// next case gets a fresh group. The race run of ./build.sh test (-race
// -short) takes one size for each rank count and memory kind, in turn.
func TestAliasingTable(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			for ni, N := range []int{2, ownRanks} {
				g := openGroup(t, bk, N)
				for mi, m := range []int{1, ownM, 64} {
					for pi, pinnedMem := range []bool{false, true} {
						if raceShort() && (2*ni+pi)%3 != mi {
							continue
						}
						for i := range aliasCases(N, m) {
							oc := ownCase{alias: true, form: i, m: m, pinned: pinnedMem}
							for _, f := range runOwnCase(g, oc, 20*time.Second, false) {
								t.Errorf("%d ranks, %s: %s", N, oc, f.msg)
							}
							ac := aliasCases(N, m)[i]
							if err := g.Err(); err != nil && (ac.ok || !strings.HasPrefix(ac.name, "SendRecv")) {
								t.Fatalf("%d ranks, %s: group broken: %v", N, oc, err)
							} else if err != nil {
								g = openGroup(t, bk, N)
							}
						}
					}
				}
			}
		})
	}
}

// TestSizeOverflow: sizes whose byte count overflows are ErrInvalidArgument,
// with nothing left in the pinned set.
func TestSizeOverflow(t *testing.T) {
	before := pin.Buffers()
	for _, n := range []int{1 << 62, 1<<63 - 1, -1} {
		if _, err := NewHostBuffer[float32](n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewHostBuffer[float32](%d): %v, want ErrInvalidArgument", n, err)
		}
		if _, err := NewHostBuffer[float64](n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewHostBuffer[float64](%d): %v, want ErrInvalidArgument", n, err)
		}
	}
	after := pin.Buffers()
	if after != before {
		t.Errorf("pinned set grew from %d to %d entries", before, after)
	}
	g := openGroup(t, "host", 1)
	for _, n := range []int{1 << 62, 1<<63 - 1} {
		if _, err := NewTensor[float32](g.Comm(0), n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewTensor[float32](%d): %v, want ErrInvalidArgument", n, err)
		}
	}
	tt, err := NewTensor[float32](g.Comm(0), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	buf, _ := tt.Buffer()
	if _, err := WrapTensor[float32](g.Comm(0), buf, 4, 1<<62); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("WrapTensor of 1<<62 elements: %v, want ErrInvalidArgument", err)
	}
}

// tset is a rank's tensors for the tensor forms: S and R of N*m elements,
// Sm and Rm of m.
type tset struct{ S, R, Sm, Rm *Tensor[float32] }

func (ts *tset) all() []*Tensor[float32] { return []*Tensor[float32]{ts.S, ts.R, ts.Sm, ts.Rm} }

type tensorForm struct {
	name string
	run  func(ctx context.Context, c *Comm, ts *tset) error
	// got names the tensor holding the result and want checks it.
	got  func(ts *tset) *Tensor[float32]
	want func(r, N, m int, b []float32) error
}

func tensorForms(N, m int) []tensorForm {
	nm := N * m
	sum := func(i int) float32 { return float32(1000*N*(N-1)/2 + N*i) }
	eq := func() ([]int, []int) {
		cnt, dsp := make([]int, N), make([]int, N)
		for q := range cnt {
			cnt[q], dsp[q] = m, q*m
		}
		return cnt, dsp
	}
	S, R, Rm := func(ts *tset) *Tensor[float32] { return ts.S }, func(ts *tset) *Tensor[float32] { return ts.R }, func(ts *tset) *Tensor[float32] { return ts.Rm }
	sumAll := func(r, N, m int, b []float32) error { return expectAt(b, 0, sum, nm) }
	a2a := func(r, N, m int, b []float32) error {
		return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + r*m + j) }, nm)
	}
	gath := func(r, N, m int, b []float32) error {
		return expectAt(b, 0, func(i int) float32 { q, j := i/m, i%m; return float32(q*1000 + j) }, nm)
	}
	rs := func(r, N, m int, b []float32) error {
		return expectAt(b, 0, func(j int) float32 { return sum(r*m + j) }, m)
	}
	atRoot := func(f func(r, N, m int, b []float32) error) func(r, N, m int, b []float32) error {
		return func(r, N, m int, b []float32) error {
			if r != 1 {
				return nil
			}
			return f(r, N, m, b)
		}
	}
	return []tensorForm{
		{"AllReduceTensor", func(ctx context.Context, c *Comm, ts *tset) error { return AllReduceTensor(ctx, c, ts.S, Sum, Auto) }, S, sumAll},
		{"AllReduceTensorAsync", func(ctx context.Context, c *Comm, ts *tset) error {
			return AllReduceTensorAsync(ctx, c, ts.S, Sum, Auto).Wait(ctx)
		}, S, sumAll},
		{"BroadcastTensor", func(ctx context.Context, c *Comm, ts *tset) error { return BroadcastTensor(ctx, c, ts.S, 0) }, S,
			func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(i int) float32 { return float32(i) }, nm)
			}},
		{"ReduceScatterTensor", func(ctx context.Context, c *Comm, ts *tset) error {
			return ReduceScatterTensor(ctx, c, ts.S, ts.Rm, Sum)
		}, Rm, rs},
		{"AllGatherTensor", func(ctx context.Context, c *Comm, ts *tset) error { return AllGatherTensor(ctx, c, ts.Sm, ts.R) }, R, gath},
		{"ReduceTensor", func(ctx context.Context, c *Comm, ts *tset) error { return ReduceTensor(ctx, c, ts.S, ts.R, Sum, 1) }, R, atRoot(sumAll)},
		{"AllToAllTensor", func(ctx context.Context, c *Comm, ts *tset) error { return AllToAllTensor(ctx, c, ts.S, ts.R) }, R, a2a},
		{"GatherTensor", func(ctx context.Context, c *Comm, ts *tset) error { return GatherTensor(ctx, c, ts.Sm, ts.R, 1) }, R, atRoot(gath)},
		{"ScatterTensor", func(ctx context.Context, c *Comm, ts *tset) error { return ScatterTensor(ctx, c, ts.S, ts.Rm, 1) }, Rm,
			func(r, N, m int, b []float32) error {
				return expectAt(b, 0, func(j int) float32 { return float32(1000 + r*m + j) }, m)
			}},
		{"AllToAllVTensor", func(ctx context.Context, c *Comm, ts *tset) error {
			cnt, dsp := eq()
			return AllToAllVTensor(ctx, c, ts.S, cnt, dsp, ts.R, cnt, dsp)
		}, R, a2a},
		{"AllGatherVTensor", func(ctx context.Context, c *Comm, ts *tset) error {
			cnt, dsp := eq()
			return AllGatherVTensor(ctx, c, ts.Sm, ts.R, cnt, dsp)
		}, R, gath},
		{"ReduceScatterVTensor", func(ctx context.Context, c *Comm, ts *tset) error {
			cnt, dsp := eq()
			return ReduceScatterVTensor(ctx, c, ts.S, ts.Rm, cnt, dsp, Sum)
		}, Rm, rs},
	}
}

func newTset(t *testing.T, c *Comm, N, m int) *tset {
	t.Helper()
	mk := func(n int, fill bool) *Tensor[float32] {
		x, err := NewTensor[float32](c, n)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, n)
		if fill {
			for i := range v {
				v[i] = float32(c.Rank()*1000 + i)
			}
		}
		if err := x.Upload(v); err != nil {
			t.Fatal(err)
		}
		return x
	}
	return &tset{S: mk(N*m, true), R: mk(N*m, false), Sm: mk(m, true), Rm: mk(m, false)}
}

// TestCloseTensorRacesEveryForm closes rank 0's tensors at a random moment
// while every rank runs a tensor form, in both tensor layouts (ranks
// sharing device memory and not).
func TestCloseTensorRacesEveryForm(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			g := openGroup(t, bk, ownRanks)
			N := g.Size()
			waited, refused := 0, 0
			defer func() { t.Logf("%d calls waited for, %d refused with ErrClosed", waited, refused) }()
			for _, f := range tensorForms(N, ownM) {
				for try := 0; try < 3; try++ {
					if g.Err() != nil {
						g = openGroup(t, bk, ownRanks)
					}
					sets := make([]*tset, N)
					for r := range sets {
						sets[r] = newTset(t, g.Comm(r), N, ownM)
					}
					closeAll := func() error {
						var errs []error
						for _, x := range sets[0].all() {
							errs = append(errs, x.Close())
						}
						return errors.Join(errs...)
					}
					var closeErr error
					var wg sync.WaitGroup
					if rng.IntN(4) == 0 {
						closeErr = closeAll()
					} else {
						delay := time.Duration(rng.IntN(400)) * time.Microsecond
						wg.Add(1)
						go func() {
							defer wg.Done()
							time.Sleep(delay)
							closeErr = closeAll()
						}()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					errs := onRanks(g, func(c *Comm) error { return f.run(ctx, c, sets[c.Rank()]) })
					cancel()
					wg.Wait()
					if closeErr != nil {
						t.Fatalf("%s: Tensor.Close: %v", f.name, closeErr)
					}
					for r := 0; r < N; r++ {
						if err := errs[r]; err != nil {
							var e *Error
							if !errors.As(err, &e) {
								t.Errorf("%s: rank %d: untyped error %T: %v", f.name, r, err, err)
							}
							continue
						}
						if r == 0 {
							continue
						}
						x := f.got(sets[r])
						b := make([]float32, x.Len())
						if err := x.Download(b); err != nil {
							t.Fatal(err)
						}
						if werr := f.want(r, N, ownM, b); werr != nil {
							t.Errorf("%s: rank %d: nil error with a wrong result: %v", f.name, r, werr)
						}
					}
					if errs[0] == nil {
						waited++
					} else if errors.Is(errs[0], ErrClosed) {
						refused++
					}
					if g.Err() == nil {
						errs = onRanks(g, func(c *Comm) error { return AllReduceTensor(context.Background(), c, sets[c.Rank()].S, Sum, Auto) })
						if !errors.Is(errs[0], ErrClosed) {
							t.Fatalf("%s: AllReduceTensor on a closed tensor: %v, want ErrClosed", f.name, errs[0])
						}
						for r := 1; r < N; r++ {
							if !errors.Is(errs[r], ErrMismatch) {
								t.Fatalf("%s: rank %d beside a closed tensor: %v, want ErrMismatch", f.name, r, errs[r])
							}
						}
					}
					for r := 1; r < N; r++ {
						for _, x := range sets[r].all() {
							x.Close()
						}
					}
					if t.Failed() {
						return
					}
				}
			}
		})
	}
}

// TestCloseGroupRacesEveryForm closes the group at a random moment while
// every rank runs a form, on HostBuffers and on tensors: each call ends
// waited and correct or with a typed error, and the memory closes after
// the group.
func TestCloseGroupRacesEveryForm(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	race := func(t *testing.T, g *Group, run func(c *Comm) error) []error {
		var wg sync.WaitGroup
		var closeErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			closeErr = g.Close()
		}()
		errs := onRanks(g, run)
		wg.Wait()
		if closeErr != nil {
			t.Fatalf("Group.Close: %v", closeErr)
		}
		return errs
	}
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			N := ownRanks
			for _, f := range sliceForms(N, ownM) {
				g := openGroup(t, bk, N)
				hbs := make([]*HostBuffer[float32], N)
				for r := range hbs {
					hb, err := NewHostBuffer[float32](4 * N * ownM)
					if err != nil {
						t.Fatal(err)
					}
					hbs[r] = hb
					ownInput(r, hb.Data)
				}
				errs := race(t, g, func(c *Comm) error { return f.run(context.Background(), c, hbs[c.Rank()].Data) })
				for r := range errs {
					checkOutcome(t, f, r, N, errs[r], hbs[r].Data, true)
					if err := hbs[r].Close(); err != nil {
						t.Errorf("%s: HostBuffer.Close after Group.Close: %v", f.name, err)
					}
				}
			}
			for _, f := range tensorForms(N, ownM) {
				g := openGroup(t, bk, N)
				sets := make([]*tset, N)
				for r := range sets {
					sets[r] = newTset(t, g.Comm(r), N, ownM)
				}
				errs := race(t, g, func(c *Comm) error { return f.run(context.Background(), c, sets[c.Rank()]) })
				for r, err := range errs {
					var e *Error
					if err != nil && !errors.As(err, &e) {
						t.Errorf("%s: rank %d: untyped error %T: %v", f.name, r, err, err)
					}
					for _, x := range sets[r].all() {
						x.Close()
					}
				}
			}
		})
	}
}

// ownCase is the ownership draw of a conformance session (drawn from the
// session's seed, so a replay repeats it): a collective form racing Close of
// rank 0's HostBuffer, or a collective with aliased arguments.
type ownCase struct {
	alias  bool
	form   int
	m      int
	pinned bool // alias: the buffers are HostBuffers
	early  bool // race: Close before the calls start
	delay  time.Duration
}

func (oc ownCase) String() string {
	if oc.alias {
		return fmt.Sprintf("aliasing case %d, m=%d, pinned=%v", oc.form, oc.m, oc.pinned)
	}
	return fmt.Sprintf("Close race on form %d, m=%d, early=%v, delay=%v", oc.form, oc.m, oc.early, oc.delay)
}

// ownRaceForms are the forms a conformance session races with Close: the
// collectives and the point-to-point forms (a call refused on one rank
// breaks the group naming itself, so its peer fails at once). Not Comm.Go,
// whose function never runs on the rank whose memory is closed (ErrClosed),
// so its peers' collectives inside wait for CommunicationTimeout as for a
// rank that skips a call (60 s in a session: 3 of the first 100 sessions
// drew it). TestCloseHostBufferRacesEveryForm covers it with a short
// timeout.
func ownRaceForms(N, m int) []sliceForm {
	var out []sliceForm
	for _, f := range sliceForms(N, m) {
		if f.name == "Comm.Go" {
			continue
		}
		out = append(out, f)
	}
	return out
}

func drawOwnCase(seed uint64, N int) ownCase {
	rng := rand.New(rand.NewPCG(seed, 0x0c105e))
	ms := []int{1, 2, 3, 63, 64, 65, 255, 256, 257, 1000 + rng.IntN(20000)}
	oc := ownCase{alias: rng.IntN(2) == 0, m: ms[rng.IntN(len(ms))], pinned: rng.IntN(2) == 0,
		early: rng.IntN(4) == 0, delay: time.Duration(rng.IntN(500)) * time.Microsecond}
	if oc.alias {
		oc.form = rng.IntN(len(aliasCases(N, oc.m)))
	} else {
		oc.form = rng.IntN(len(ownRaceForms(N, oc.m)))
	}
	return oc
}

// runOwnCase runs oc on g and returns its failures. faulty: faults are
// injected at the backend seam, so an in-place call may also fail with a
// typed *Error.
func runOwnCase(g *Group, oc ownCase, limit time.Duration, faulty bool) []confFail {
	N, m := g.Size(), oc.m
	var fails []confFail
	fail := func(kind, format string, a ...any) {
		fails = append(fails, confFail{kind, fmt.Sprintf(format, a...)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	bufs := make([][]float32, N)
	hbs := make([]*HostBuffer[float32], N)
	for r := range bufs {
		if oc.pinned || !oc.alias {
			hb, err := NewHostBuffer[float32](4 * N * m)
			if err != nil {
				fail("setup", "NewHostBuffer: %v", err)
				return fails
			}
			hbs[r], bufs[r] = hb, hb.Data
		} else {
			bufs[r] = make([]float32, 4*N*m)
		}
		ownInput(r, bufs[r])
	}
	defer func() {
		for _, hb := range hbs {
			if hb != nil {
				hb.Close()
			}
		}
	}()
	if oc.alias {
		ac := aliasCases(N, m)[oc.form]
		before := make([][]float32, N)
		for r := range bufs {
			before[r] = append([]float32(nil), bufs[r]...)
		}
		errs, hung := runRanksWithin(g, limit+10*time.Second, func(c *Comm) error { return ac.run(ctx, c, bufs[c.Rank()]) })
		if hung != "" {
			fail("hang", "%s: hang:\n%s", ac.name, hung)
			return fails
		}
		for r, err := range errs {
			switch {
			case ac.ok && err != nil:
				var e *Error
				if !faulty || !errors.As(err, &e) || errors.Is(err, ErrInvalidArgument) {
					fail("aliasing: in-place layout refused", "%s: rank %d: %v", ac.name, r, err)
				}
			case ac.ok:
				if werr := ac.want(r, N, m, bufs[r]); werr != nil {
					fail("aliasing: wrong in-place result", "%s: rank %d: %v", ac.name, r, werr)
				}
			case !errors.Is(err, ErrInvalidArgument):
				fail("aliasing: overlap not refused", "%s: rank %d: %v, want ErrInvalidArgument", ac.name, r, err)
			default:
				for i := range bufs[r] {
					if bufs[r][i] != before[r][i] {
						fail("aliasing: refused call wrote its buffers", "%s: rank %d: element %d written", ac.name, r, i)
						break
					}
				}
			}
		}
		return fails
	}
	f := ownRaceForms(N, m)[oc.form]
	var closeErr error
	var wg sync.WaitGroup
	if oc.early {
		closeErr = hbs[0].Close()
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(oc.delay)
			closeErr = hbs[0].Close()
		}()
	}
	errs, hung := runRanksWithin(g, limit+10*time.Second, func(c *Comm) error { return f.run(ctx, c, bufs[c.Rank()]) })
	if hung != "" {
		fail("hang", "%s racing HostBuffer.Close: hang:\n%s", f.name, hung)
		return fails
	}
	wg.Wait()
	// Under injected faults a device may be declared lost: Close then
	// leaks the memory and says so (ErrDeviceLost), a defined outcome.
	if closeErr != nil && !(faulty && errors.Is(closeErr, ErrDeviceLost)) {
		fail("HostBuffer.Close", "%s: HostBuffer.Close: %v", f.name, closeErr)
	}
	for r, err := range errs {
		if msg := outcomeError(f, r, N, m, err, bufs[r], r != 0); msg != "" {
			fail("Close race: undefined outcome", "%s", msg)
		}
	}
	return fails
}

// TestCloseWaitsForGoAndExec: memory named to Comm.Go and Comm.Exec is
// held until the operation ended (Close waits), and memory closed already
// fails the operation with ErrClosed.
func TestCloseWaitsForGoAndExec(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			g := openGroup(t, bk, 1)
			c := g.Comm(0)
			ctx := context.Background()
			hb, err := NewHostBuffer[float32](1024)
			if err != nil {
				t.Fatal(err)
			}
			data := hb.Data
			var done atomic.Bool
			started := make(chan struct{})
			w := c.Go(ctx, "user step", func(ctx context.Context) error {
				close(started)
				time.Sleep(30 * time.Millisecond)
				data[0] = 1 // still mapped: Close waits for this operation
				done.Store(true)
				return nil
			}, Mem(data))
			<-started
			if err := hb.Close(); err != nil {
				t.Fatal(err)
			}
			if !done.Load() {
				t.Fatal("HostBuffer.Close returned before the Comm.Go operation using it ended")
			}
			if err := w.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Go(ctx, "late", func(context.Context) error { return nil }, Mem(data)).Wait(ctx); !errors.Is(err, ErrClosed) {
				t.Fatalf("Comm.Go naming a closed HostBuffer: %v, want ErrClosed", err)
			}

			tt, err := NewTensor[float32](c, 256)
			if err != nil {
				t.Fatal(err)
			}
			done.Store(false)
			inRecord := make(chan struct{})
			closed := make(chan error, 1)
			go func() {
				<-inRecord
				closed <- tt.Close()
			}()
			err = c.Exec(ctx, "user kernels", func(s backend.Stream) error {
				close(inRecord)
				time.Sleep(30 * time.Millisecond)
				done.Store(true)
				return nil
			}, tt)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if !done.Load() {
				t.Fatal("Tensor.Close returned before the Comm.Exec using it ended")
			}
			if err := c.Exec(ctx, "late", func(backend.Stream) error { return nil }, tt); !errors.Is(err, ErrClosed) {
				t.Fatalf("Comm.Exec naming a closed Tensor: %v, want ErrClosed", err)
			}
		})
	}
}
