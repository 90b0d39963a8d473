//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

var _ backend.Transport = (*World)(nil)

// begin returns the World and a context for one test, after a barrier that
// keeps the processes' tests in step.
func begin(t *testing.T, timeout time.Duration) (*World, context.Context) {
	t.Helper()
	w := needWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if err := w.Barrier(ctx); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	return w, ctx
}

// pattern is n bytes that depend on src, n and salt.
func pattern(src, n, salt int) []byte {
	p := make([]byte, n)
	x := uint32(src*2654435761 + n*40503 + salt*97 + 1)
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

// exchange sends send to next and receives recv from prev with tag.
func exchange(ctx context.Context, w *World, send, recv []byte, next, prev, tag int) error {
	rr, err := w.Irecv(recv, prev, tag)
	if err != nil {
		return err
	}
	sr, err := w.Isend(send, next, tag)
	if err != nil {
		return errors.Join(err, rr.Cancel())
	}
	return errors.Join(Wait(ctx, sr), Wait(ctx, rr))
}

// send sends p to peer with tag and waits for it.
func send(ctx context.Context, w *World, p []byte, peer, tag int) error {
	r, err := w.Isend(p, peer, tag)
	if err != nil {
		return err
	}
	return Wait(ctx, r)
}

// recv receives p from peer with tag and waits for it.
func recv(ctx context.Context, w *World, p []byte, peer, tag int) error {
	r, err := w.Irecv(p, peer, tag)
	if err != nil {
		return err
	}
	return Wait(ctx, r)
}

func neighbours(w *World) (next, prev int) {
	return (w.Rank() + 1) % w.Size(), (w.Rank() + w.Size() - 1) % w.Size()
}

// setLimit lowers the largest count per MPI call on every process, so that
// messages and reductions are split, until the test ends.
func setLimit(t *testing.T, w *World, limit int) {
	w.limit = limit
	t.Cleanup(func() { w.limit = maxInt })
}

func TestRankSize(t *testing.T) {
	w, ctx := begin(t, 20*time.Second)
	if w.Name() != "mpi" {
		t.Errorf("Name = %q", w.Name())
	}
	if w.Rank() < 0 || w.Rank() >= w.Size() {
		t.Fatalf("Rank %d outside [0, %d)", w.Rank(), w.Size())
	}
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} {
		if s := os.Getenv(v); s != "" && s != strconv.Itoa(w.Size()) {
			t.Errorf("Size %d, but %s=%s", w.Size(), v, s)
		}
	}
	if want, _ := parseThreadLevel(os.Getenv("GOCOLL_MPI_THREAD")); w.ThreadLevel() != want {
		t.Errorf("ThreadLevel %v, want %v", w.ThreadLevel(), want)
	}
	if w.Rank() == 0 {
		version, _, _ := strings.Cut(w.LibraryVersion(), "\n")
		t.Logf("%d processes, thread level %v, %s", w.Size(), w.ThreadLevel(), strings.TrimSpace(version))
	}
	mine := binary.LittleEndian.AppendUint32(nil, uint32(w.Rank()))
	all := make([]byte, 4*w.Size())
	if err := w.Allgather(ctx, mine, all); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < w.Size(); p++ {
		if got := binary.LittleEndian.Uint32(all[4*p:]); got != uint32(p) {
			t.Errorf("slot %d holds rank %d", p, got)
		}
	}
}

func TestRingExchange(t *testing.T) {
	needWorld(t)
	sizes := []int{0, 1, 4097, 1<<20 + 3}
	for _, limit := range []int{maxInt, 4000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			w, ctx := begin(t, 30*time.Second)
			setLimit(t, w, limit)
			next, prev := neighbours(w)
			for i, n := range sizes {
				recv := make([]byte, n)
				if err := exchange(ctx, w, pattern(w.Rank(), n, i), recv, next, prev, 10+i); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if !bytes.Equal(recv, pattern(prev, n, i)) {
					t.Errorf("%d bytes from process %d: wrong contents", n, prev)
				}
				// A process may send to itself.
				self := make([]byte, n)
				if err := exchange(ctx, w, pattern(w.Rank(), n, -i), self, w.Rank(), w.Rank(), 20+i); err != nil {
					t.Fatalf("%d bytes to itself: %v", n, err)
				}
				if !bytes.Equal(self, pattern(w.Rank(), n, -i)) {
					t.Errorf("%d bytes to itself: wrong contents", n)
				}
			}
		})
	}
}

func TestAllgather(t *testing.T) {
	needWorld(t)
	fingerprint := func(p, size, n int) []byte {
		sum := sha256.Sum256(fmt.Appendf(nil, "gocoll process %d of %d", p, size))
		return bytes.Repeat(sum[:], n/32+1)[:n]
	}
	for _, tc := range []struct{ n, limit int }{{32, maxInt}, {0, maxInt}, {13, maxInt}, {13, 5}, {100003, 4096}} {
		t.Run(fmt.Sprintf("n=%d/limit=%d", tc.n, tc.limit), func(t *testing.T) {
			w, ctx := begin(t, 20*time.Second)
			setLimit(t, w, tc.limit)
			all := make([]byte, w.Size()*tc.n)
			if err := w.Allgather(ctx, fingerprint(w.Rank(), w.Size(), tc.n), all); err != nil {
				t.Fatal(err)
			}
			for p := 0; p < w.Size(); p++ {
				if !bytes.Equal(all[p*tc.n:(p+1)*tc.n], fingerprint(p, w.Size(), tc.n)) {
					t.Errorf("slot %d does not hold process %d's fingerprint", p, p)
				}
			}
		})
	}
}

// exactInput is process p's element i for op: small integers (sum, max,
// min) or signed powers of two (prod), so every result is exact.
func exactInput(op backend.Op, p, i int) float64 {
	if op == backend.Prod {
		return []float64{1, 2, -1, 0.5, -2}[(i+3*p)%5]
	}
	return float64((i*7+p*3)%17 - 8)
}

func reduce(op backend.Op, a, b float64) float64 {
	switch op {
	case backend.Prod:
		return a * b
	case backend.Max:
		return math.Max(a, b)
	case backend.Min:
		return math.Min(a, b)
	}
	return a + b
}

// allreduce runs AllreduceF32 or AllreduceF64 on float64 data.
func allreduce(ctx context.Context, w *World, dt backend.DType, op backend.Op, in []float64, inPlace bool) ([]float64, error) {
	out := make([]float64, len(in))
	if dt == backend.F64 {
		send, recv := slices.Clone(in), make([]float64, len(in))
		if inPlace {
			recv = send
		}
		err := w.AllreduceF64(ctx, send, recv, op)
		copy(out, recv)
		return out, err
	}
	send, recv := make([]float32, len(in)), make([]float32, len(in))
	for i, v := range in {
		send[i] = float32(v)
	}
	if inPlace {
		recv = send
	}
	err := w.AllreduceF32(ctx, send, recv, op)
	for i, v := range recv {
		out[i] = float64(v)
	}
	return out, err
}

func TestAllreduce(t *testing.T) {
	w, ctx := begin(t, 40*time.Second)
	for _, dt := range []backend.DType{backend.F32, backend.F64} {
		for op := backend.Sum; op <= backend.Min; op++ {
			for _, n := range []int{0, 1, 1027, 1<<14 + 5} {
				for _, inPlace := range []bool{false, true} {
					in := make([]float64, n)
					want := make([]float64, n)
					for i := range in {
						in[i] = exactInput(op, w.Rank(), i)
						want[i] = exactInput(op, 0, i)
						for p := 1; p < w.Size(); p++ {
							want[i] = reduce(op, want[i], exactInput(op, p, i))
						}
					}
					got, err := allreduce(ctx, w, dt, op, in, inPlace)
					if err != nil {
						t.Fatalf("%v %v n=%d in place %v: %v", dt, op, n, inPlace, err)
					}
					if i := firstDiff(got, want, 0); i >= 0 {
						t.Errorf("%v %v n=%d in place %v: [%d] = %v, want %v", dt, op, n, inPlace, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestAllreduceRandom checks sums of random data against a float64
// reference, within n*eps*sum|x| (MPI chooses the order of the sum).
func TestAllreduceRandom(t *testing.T) {
	needWorld(t)
	for _, limit := range []int{maxInt, 1000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			w, ctx := begin(t, 20*time.Second)
			setLimit(t, w, limit)
			const n = 10007
			input := func(p int) []float64 {
				r := rand.New(rand.NewPCG(uint64(p), 7))
				x := make([]float64, n)
				for i := range x {
					x[i] = r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4))
				}
				return x
			}
			for _, dt := range []backend.DType{backend.F32, backend.F64} {
				eps := math.Exp2(-53)
				if dt == backend.F32 {
					eps = math.Exp2(-24)
				}
				want, mag := make([]float64, n), make([]float64, n)
				for p := 0; p < w.Size(); p++ {
					for i, v := range input(p) {
						if dt == backend.F32 {
							v = float64(float32(v))
						}
						want[i] += v
						mag[i] += math.Abs(v)
					}
				}
				got, err := allreduce(ctx, w, dt, backend.Sum, input(w.Rank()), false)
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if bound := float64(w.Size()+1) * eps * mag[i]; math.Abs(got[i]-want[i]) > bound {
						t.Errorf("%v sum [%d] = %v, want %v within %v", dt, i, got[i], want[i], bound)
						break
					}
				}
			}
		})
	}
}

func firstDiff(got, want []float64, tol float64) int {
	if len(got) != len(want) {
		return 0
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol || math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			return i
		}
	}
	return -1
}

// TestAllgatherTimeout: the last process calls Allgather only after the
// others timed out (they tell it so). The others must return a timeout
// within the deadline + 250 ms that names it; its late call then completes
// the collective the others left posted, and the World works on.
func TestAllgatherTimeout(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	const deadline = 300 * time.Millisecond
	const timedOutTag = 800
	late := w.Size() - 1
	mine := []byte{byte(w.Rank()), 0xA5}
	all := make([]byte, 2*w.Size())
	check := func(what string) {
		for p := 0; p < w.Size(); p++ {
			if all[2*p] != byte(p) || all[2*p+1] != 0xA5 {
				t.Errorf("%s: slot %d = %v", what, p, all[2*p:2*p+2])
			}
		}
	}
	if w.Rank() == late {
		for p := 0; p < late; p++ {
			if err := recv(ctx, w, nil, p, timedOutTag); err != nil {
				t.Fatalf("waiting for process %d to time out: %v", p, err)
			}
		}
		if err := w.Allgather(ctx, mine, all); err != nil {
			t.Fatalf("late Allgather: %v", err)
		}
		check("late Allgather")
	} else {
		dctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		err := w.Allgather(dctx, mine, all)
		elapsed := time.Since(start)
		cancel()
		if err := send(ctx, w, nil, late, timedOutTag); err != nil {
			t.Fatalf("telling process %d: %v", late, err)
		}
		t.Logf("process %d: after %v: %v", w.Rank(), elapsed.Round(time.Millisecond), err)
		if !errors.Is(err, backend.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Allgather without process %d = %v, want ErrTimeout and DeadlineExceeded", late, err)
		}
		if elapsed > deadline+250*time.Millisecond {
			t.Errorf("returned after %v, deadline %v + 250 ms", elapsed, deadline)
		}
		var e *Error
		if !errors.As(err, &e) || !slices.Equal(e.Ranks, []int{late}) {
			t.Errorf("error names processes %v, want [%d]", e.Ranks, late)
		}
		if bytes.Count(all, []byte{0}) != len(all) {
			t.Errorf("all was written by a collective that timed out: %v", all)
		}
	}
	// Everyone is in step again.
	if err := w.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after the timeout: %v", err)
	}
	clear(all)
	if err := w.Allgather(ctx, mine, all); err != nil {
		t.Fatalf("Allgather after the timeout: %v", err)
	}
	check("Allgather after the timeout")
	waitBackground(t, w)
}

// waitBackground waits for the World to finish the requests left to it.
func waitBackground(t *testing.T, w *World) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.progressBackground()
		if n := w.background(); n == 0 {
			return
		} else if time.Now().After(deadline) {
			t.Errorf("%d requests still left to the World", n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCancel(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	next, prev := neighbours(w)

	// A receive nobody sends to is cancelled at once, and does not take the
	// message that arrives on its tag later.
	buf := make([]byte, 16)
	rr, err := w.Irecv(buf, prev, 500)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rr.Cancel(); err != nil {
		t.Fatalf("Cancel of a pending receive: %v", err)
	}
	if d := time.Since(start); d > cancelGrace {
		t.Errorf("Cancel of a pending receive took %v", d)
	}
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exchange(ctx, w, pattern(w.Rank(), 16, 500), buf, next, prev, 500); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(prev, 16, 500)) {
		t.Errorf("message after a cancelled receive: wrong contents")
	}

	// Wait with a deadline on a receive that never comes.
	rr, err = w.Irecv(buf, prev, 501)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	start = time.Now()
	err = Wait(dctx, rr)
	elapsed := time.Since(start)
	cancel()
	var e *Error
	if !errors.Is(err, backend.ErrTimeout) || !errors.As(err, &e) || !slices.Equal(e.Ranks, []int{prev}) ||
		!strings.Contains(err.Error(), fmt.Sprintf("from process %d", prev)) {
		t.Errorf("Wait on a receive that never comes = %v; want ErrTimeout naming process %d", err, prev)
	}
	if elapsed > 350*time.Millisecond {
		t.Errorf("Wait returned after %v, deadline 100 ms", elapsed)
	}

	// A large send nobody receives yet: MPI may cancel it, or not (Open MPI
	// does not cancel sends); the receiver drains what was not cancelled.
	const n = 4 << 20
	sr, err := w.Isend(pattern(w.Rank(), n, 502), next, 502)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := sr.(*request).cancel()
	outcome := byte(0) // completed
	switch {
	case errors.Is(err, ErrInFlight):
		outcome = 2
	case err != nil:
		t.Fatalf("Cancel of a pending send: %v", err)
	case cancelled:
		outcome = 1
	}
	all := make([]byte, w.Size())
	if err := w.Allgather(ctx, []byte{outcome}, all); err != nil {
		t.Fatal(err)
	}
	if w.Rank() == 0 {
		t.Logf("Cancel of a pending 4 MiB send: outcomes by process %v (0 completed, 1 cancelled, 2 in flight)", all)
	}
	if all[prev] != 1 {
		big := make([]byte, n)
		if err := recv(ctx, w, big, prev, 502); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(big, pattern(prev, n, 502)) {
			t.Errorf("the send that was not cancelled delivered wrong contents")
		}
	}
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	waitBackground(t, w)
}

// TestConcurrent runs exchanges from several goroutines at once, with
// messages split into pieces, while another goroutine runs collectives.
func TestConcurrent(t *testing.T) {
	w, ctx := begin(t, 40*time.Second)
	setLimit(t, w, 3000)
	next, prev := neighbours(w)
	const goroutines, iters = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines+1)
	for g := range goroutines {
		wg.Go(func() {
			for it := range iters {
				n := (g*131 + it*177) % 7000
				recv := make([]byte, n)
				if err := exchange(ctx, w, pattern(w.Rank()*100+g, n, it), recv, next, prev, 1000+g); err != nil {
					errs <- fmt.Errorf("goroutine %d, exchange %d: %w", g, it, err)
					return
				}
				if !bytes.Equal(recv, pattern(prev*100+g, n, it)) {
					errs <- fmt.Errorf("goroutine %d, exchange %d: wrong contents", g, it)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for it := range iters {
			sum := []float64{float64(w.Rank() + it)}
			if err := w.AllreduceF64(ctx, sum, sum, backend.Sum); err != nil {
				errs <- err
				return
			}
			n := w.Size()
			if want := float64(n*(n-1)/2 + n*it); sum[0] != want {
				errs <- fmt.Errorf("allreduce %d = %v, want %v", it, sum[0], want)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestConcurrentCollective: a second collective while one is in progress on
// the same World is refused at once. Process 0 holds a Barrier open (the
// others join it only when told) and tries an Allgather meanwhile.
func TestConcurrentCollective(t *testing.T) {
	w, ctx := begin(t, 20*time.Second)
	const goTag = 801
	if w.Rank() != 0 {
		if err := recv(ctx, w, nil, 0, goTag); err != nil {
			t.Fatal(err)
		}
		if err := w.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	done := make(chan error, 1)
	go func() {
		for {
			// The probe below may take the World for an instant: retry.
			err := w.Barrier(ctx)
			if !errors.Is(err, backend.ErrInvalidArgument) {
				done <- err
				return
			}
		}
	}()
	// Wait until the Barrier holds the World.
	for w.collMu.TryLock() {
		w.collMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	err := w.Allgather(ctx, nil, nil)
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Allgather during a Barrier = %v, want ErrInvalidArgument", err)
	}
	for p := 1; p < w.Size(); p++ {
		if err := send(ctx, w, nil, p, goTag); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	w, ctx := begin(t, 20*time.Second)
	next, prev := neighbours(w)
	if _, err := w.Isend(nil, w.Size(), 0); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Isend to process %d = %v, want ErrInvalidArgument", w.Size(), err)
	}
	if _, err := w.Irecv(nil, 0, -1); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Irecv with tag -1 = %v, want ErrInvalidArgument", err)
	}
	if err := w.Allgather(ctx, make([]byte, 2), make([]byte, 3)); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Allgather into the wrong length = %v, want ErrInvalidArgument", err)
	}
	if err := w.AllreduceF32(ctx, make([]float32, 2), make([]float32, 3), backend.Sum); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("AllreduceF32 of unequal lengths = %v, want ErrInvalidArgument", err)
	}
	x := make([]float64, 4)
	if err := w.AllreduceF64(ctx, x[:3], x[1:], backend.Sum); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("AllreduceF64 of overlapping slices = %v, want ErrInvalidArgument", err)
	}
	if err := w.AllreduceF64(ctx, x, x, backend.Op(9)); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("AllreduceF64 with op 9 = %v, want ErrInvalidArgument", err)
	}

	// A message longer than the receive buffer: MPI_ERR_TRUNCATE.
	err := exchange(ctx, w, make([]byte, 20), make([]byte, 10), next, prev, 600)
	var e *Error
	if !errors.Is(err, ErrMessageSize) || !errors.Is(err, ErrMPI) || !errors.As(err, &e) || e.Code == 0 || e.Msg == "" {
		t.Errorf("20 bytes into 10 = %v, want an MPI error matching ErrMessageSize", err)
	} else if w.Rank() == 0 {
		t.Logf("20 bytes into 10: %v", err)
	}
	// A shorter one: found here, not by MPI.
	err = exchange(ctx, w, make([]byte, 10), make([]byte, 20), next, prev, 601)
	if !errors.Is(err, ErrMessageSize) || errors.Is(err, ErrMPI) {
		t.Errorf("10 bytes into 20 = %v, want ErrMessageSize", err)
	}
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAllocs measures the Go allocations of steady-state point-to-point
// traffic (Irecv + Isend + Test until done) and of the collectives.
func TestAllocs(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	next, prev := neighbours(w)
	send, recv := make([]byte, 64), make([]byte, 64)
	p2p := testing.AllocsPerRun(500, func() {
		rr, err := w.Irecv(recv, prev, 700)
		if err != nil {
			panic(err)
		}
		sr, err := w.Isend(send, next, 700)
		if err != nil {
			panic(err)
		}
		for _, r := range []backend.Request{sr, rr} {
			for {
				done, err := r.Test()
				if err != nil {
					panic(err)
				}
				if done {
					break
				}
			}
		}
	})
	wait := testing.AllocsPerRun(500, func() {
		if err := exchange(ctx, w, send, recv, next, prev, 701); err != nil {
			panic(err)
		}
	})
	f := []float32{1, 2, 3, 4}
	red := testing.AllocsPerRun(100, func() {
		if err := w.AllreduceF32(ctx, f, f, backend.Max); err != nil {
			panic(err)
		}
	})
	all := make([]byte, 8*w.Size())
	gather := testing.AllocsPerRun(100, func() {
		if err := w.Allgather(ctx, send[:8], all); err != nil {
			panic(err)
		}
	})
	t.Logf("process %d (%v): allocations per Irecv+Isend+Test round %.2f, with Wait %.2f; per AllreduceF32 %.2f, Allgather %.2f",
		w.Rank(), w.ThreadLevel(), p2p, wait, red, gather)
	if p2p > 0 && !raceEnabled {
		t.Errorf("steady-state Irecv+Isend+Test allocates %.2f times per round, want 0", p2p)
	}
}

// TestGoSignals checks that MPI left Go's signal handlers alone: a nil
// dereference is still a Go panic that recover catches.
func TestGoSignals(t *testing.T) {
	needWorld(t)
	defer func() {
		if r := recover(); r == nil {
			t.Error("no panic")
		}
	}()
	var p *int
	_ = *p
}
