package host

import (
	"math"
	"runtime"
	"sync"

	"github.com/gocoll/gocoll/backend"
)

const (
	// parallelElems is the kernel size (elements) above which a kernel is
	// split across the worker pool; chunkElems the smallest chunk it makes.
	parallelElems = 64 << 10
	chunkElems    = 32 << 10
	// parallelBytes and chunkBytes are the same for copies (bytes).
	parallelBytes = 1 << 20
	chunkBytes    = 512 << 10
	// block is how many elements a kernel reduces at a time through a local
	// accumulator: every source of a block is read before the block is
	// stored, so dst may be any one of the sources.
	block = 1024
)

// executor runs a device's batches on its worker goroutine.
type executor struct {
	wg sync.WaitGroup // chunks handed to the pool
}

// run executes the commands of b in order.
func (e *executor) run(b *batch) {
	for i := range b.cmds {
		c := &b.cmds[i]
		e.exec(c, b.srcs[c.srcLo:c.srcHi])
	}
}

// exec executes one command, in chunks over the pool when it is large. The
// result does not depend on the chunking: every element is computed alone.
func (e *executor) exec(c *command, srcs [][]byte) {
	if c.kind >= cmdPack {
		execCompress(c)
		return
	}
	n, threshold, minChunk, align := len(c.dst), parallelBytes, chunkBytes, 1
	if c.kind != cmdCopy {
		n /= c.dt.Size()
		threshold, minChunk, align = parallelElems, chunkElems, block
	}
	parts := 1
	if n > threshold {
		parts = min(runtime.GOMAXPROCS(0), (n+minChunk-1)/minChunk)
	}
	if parts <= 1 {
		execRange(c, srcs, 0, n)
		return
	}
	step := (n + parts - 1) / parts
	step = (step + align - 1) / align * align
	tasks := startPool()
	for lo := step; lo < n; lo += step {
		e.wg.Add(1)
		tasks <- task{c: c, srcs: srcs, lo: lo, hi: min(lo+step, n), wg: &e.wg}
	}
	execRange(c, srcs, 0, min(step, n))
	e.wg.Wait()
}

// task is a chunk [lo, hi) of a command for a pool goroutine.
type task struct {
	c      *command
	srcs   [][]byte
	lo, hi int
	wg     *sync.WaitGroup
}

// The pool is shared by every device of the process, so that many devices
// (one per rank) do not oversubscribe the CPU: GOMAXPROCS goroutines, started
// on the first large kernel, living as long as the process.
var (
	poolOnce  sync.Once
	poolTasks chan task
)

func startPool() chan task {
	poolOnce.Do(func() {
		workers := runtime.GOMAXPROCS(0)
		poolTasks = make(chan task, 4*workers)
		for range workers {
			go func() {
				for t := range poolTasks {
					execRange(t.c, t.srcs, t.lo, t.hi)
					t.wg.Done()
				}
			}()
		}
	})
	return poolTasks
}

// execRange executes elements (bytes, for a copy) [lo, hi) of c.
func execRange(c *command, srcs [][]byte, lo, hi int) {
	switch c.kind {
	case cmdCopy:
		copy(c.dst[lo:hi], c.src[lo:hi])
	case cmdScale:
		if c.dt == backend.F64 {
			scaleRange(view[float64](c.dst)[lo:hi], view[float64](c.src)[lo:hi], c)
		} else {
			scaleRange(view[float32](c.dst)[lo:hi], view[float32](c.src)[lo:hi], c)
		}
	case cmdReduce, cmdReduceMulti:
		srcs, more := srcs[:len(srcs)-c.ndst], srcs[len(srcs)-c.ndst:]
		if c.dt == backend.F64 {
			reduceRange(c.op, view[float64](c.dst), more, srcs, lo, hi, c)
		} else {
			reduceRange(c.op, view[float32](c.dst), more, srcs, lo, hi, c)
		}
	}
}

// scaleRange is kernels/scale.comp: dst[i] = src[i] scaled as c says, or a
// copy. dst and src are the same length and may be the same memory.
func scaleRange[T float](dst, src []T, c *command) {
	if !c.useScale {
		copy(dst, src) // bit for bit, NaN payloads included
		return
	}
	applyScale(dst[:len(src)], src, c)
}

// applyScale sets dst[i] = src[i] * c.scale in T, or, when the scale is
// 1/c.div, the quotient src[i] / c.div correctly rounded to T: exact in
// float64, and for f32 rounded twice, which for a quotient is the same as
// once (float64 has more than 2*24+2 bits). dst may be src.
func applyScale[T float](dst, src []T, c *command) {
	if div := c.div; div != 0 {
		for i, v := range src {
			dst[i] = T(float64(v) / div)
		}
		return
	}
	s := T(c.scale)
	for i, v := range src {
		dst[i] = T(v * s) // the conversion forbids fusing with anything else
	}
}

// reduceRange is kernels/reduce.comp over elements [lo, hi):
// dst[i] = op(srcs[0][i], srcs[1][i], ...), reduced left to right in T, then
// scaled as c says, and stored to dst and to every region of more (the other
// destinations of a reduce multi). A partial result of a GPU pass is stored
// in T and read back as T, so one pass over all sources gives the same bits
// as passes of eight.
func reduceRange[T float](op backend.Op, dst []T, more, srcs [][]byte, lo, hi int, c *command) {
	var buf [block]T
	for b := lo; b < hi; b += block {
		e := min(b+block, hi)
		acc := buf[:e-b]
		copy(acc, view[T](srcs[0])[b:e])
		for _, src := range srcs[1:] {
			combine(op, acc, view[T](src)[b:e])
		}
		if c.useScale {
			applyScale(acc, acc, c)
		}
		copy(dst[b:e], acc)
		for _, m := range more {
			copy(view[T](m)[b:e], acc)
		}
	}
}

// combine sets acc[i] = op(acc[i], x[i]) as reduce.comp's combine does.
func combine[T float](op backend.Op, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] = T(acc[i] + v)
		}
	case backend.Prod:
		for i, v := range x {
			acc[i] = T(acc[i] * v)
		}
	case backend.Max:
		for i, v := range x {
			acc[i] = maximum(acc[i], v)
		}
	case backend.Min:
		for i, v := range x {
			acc[i] = minimum(acc[i], v)
		}
	}
}

// maximum is IEEE 754-2019 maximum as reduce.comp computes it: a if a is NaN,
// else b if b is NaN; of equal values (+0 and -0) the non-negative one.
func maximum[T float](a, b T) T {
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a == b {
		if math.Signbit(float64(a)) {
			return b
		}
		return a
	}
	if a > b {
		return a
	}
	return b
}

// minimum is IEEE 754-2019 minimum as reduce.comp computes it: a if a is NaN,
// else b if b is NaN; of equal values (+0 and -0) the negative one.
func minimum[T float](a, b T) T {
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a == b {
		if math.Signbit(float64(a)) {
			return a
		}
		return b
	}
	if a < b {
		return a
	}
	return b
}
