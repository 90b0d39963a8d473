package hostmath

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// TestReduceMultiMatchesReference: ReduceMulti of every type and op
// against a plain loop in float64 on exact values (small integers; Prod's
// powers of two), for 1..9 sources and 1..3 destinations, counts around
// the 1024-element block (the reference rounded once to the type), out of place and in place (each destination the
// same memory as one source), serially and in parallel chunks: every
// destination holds the reference.
func TestReduceMultiMatchesReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	defer func(c int) { chunkBytes = c }(chunkBytes)
	types := []backend.DType{backend.F32, backend.F64, backend.I32, backend.U32, backend.I64, backend.U64,
		backend.I8, backend.U8, backend.I16, backend.U16, backend.Half, backend.BFloat16, backend.F8E4M3, backend.F8E5M2}
	for _, dt := range types {
		for _, op := range []backend.Op{backend.Sum, backend.Prod, backend.Max, backend.Min} {
			for _, cnt := range []int{0, 1, 15, 17, 1023, 1024, 1025, 3001} {
				k, nd := 1+rng.IntN(9), 1+rng.IntN(3)
				nd = min(nd, k)
				es := dt.Size()
				vals := make([][]float64, k)
				srcs := make([][]byte, k)
				for p := range k {
					vals[p], srcs[p] = make([]float64, cnt), make([]byte, cnt*es)
					for i := range cnt {
						v := float64(rng.IntN(5) - 2)
						if op == backend.Prod {
							v = []float64{-1, 1, 2, -2}[rng.IntN(4)]
							if es == 1 {
								v = []float64{-1, 1}[rng.IntN(2)]
							}
						}
						if !dt.Signed() && dt.IsInt() && v < 0 {
							v = -v
						}
						vals[p][i] = v
						put(dt, srcs[p], i, v)
					}
				}
				want := make([]float64, cnt)
				for i := range want {
					w := vals[0][i]
					for p := 1; p < k; p++ {
						switch b := vals[p][i]; op {
						case backend.Sum:
							w += b
						case backend.Prod:
							w *= b
						case backend.Max:
							w = math.Max(w, b)
						case backend.Min:
							w = math.Min(w, b)
						}
					}
					one := make([]byte, es) // rounded once to the type (the 8-bit floats' 2 or 3 bits)
					put(dt, one, 0, w)
					want[i] = get(dt, one, 0)
				}
				for _, inPlace := range []bool{false, true} {
					for _, chunk := range []int{parreduce.ChunkBytes, 64 * es} {
						chunkBytes = chunk
						ins := make([][]byte, k)
						for p := range ins {
							ins[p] = append([]byte(nil), srcs[p]...)
						}
						dsts := make([][]byte, nd)
						for j := range dsts {
							dsts[j] = make([]byte, cnt*es)
							if inPlace {
								dsts[j] = ins[k-1-j] // the last sources: read before their blocks are stored
							}
						}
						ReduceMulti(dt, op, dsts, ins, cnt, 1)
						for j, d := range dsts {
							for i := range cnt {
								if got := get(dt, d, i); got != want[i] && !(want[i] == 0 && got == 0) {
									t.Fatalf("%v %v k=%d cnt=%d in-place=%v chunk=%d: destination %d element %d = %v, want %v",
										dt, op, k, cnt, inPlace, chunk, j, i, got, want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestCopy: Copy and CopyPieces (pieces of a chunk, two, and above 3 MiB)
// move every byte, below and above the parallel threshold, at odd
// lengths, and return the count copy would.
func TestCopy(t *testing.T) {
	for _, n := range []int{0, 1, 4097, parreduce.CopyMin - 1, parreduce.CopyMin, 3*parreduce.CopyMin + 13} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>11)
		}
		for _, piece := range []int{0, 1, 2 * parreduce.ChunkBytes, 3<<20 + 1} { // 0: Copy; 1: at least a chunk
			dst := make([]byte, n+5)
			got := Copy(dst, src)
			if piece > 0 {
				got = CopyPieces(dst, src, piece)
			}
			if got != n {
				t.Fatalf("n=%d piece %d: copied %d", n, piece, got)
			}
			if string(dst[:n]) != string(src) || string(dst[n:]) != "\x00\x00\x00\x00\x00" {
				t.Fatalf("n=%d piece %d: wrong bytes", n, piece)
			}
		}
	}
}

// TestCopyBlocks: CopyBlocks against a plain loop, blocks of random sizes
// (1 byte to above the pool's pieces) and strides, below and above the
// parallel threshold, with a last block cut short; nothing past dst.
func TestCopyBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 40 {
		bs := 1 + rng.IntN(3*parreduce.ChunkBytes)
		if rng.IntN(2) == 0 {
			bs = 1 + rng.IntN(64)
		}
		stride := bs + rng.IntN(100)
		blocks := 1 + rng.IntN(9)
		n := blocks*bs - rng.IntN(bs) // the last block cut short
		src := make([]byte, (blocks-1)*stride+bs)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		dst := make([]byte, n+3)
		CopyBlocks(dst[:n], src, bs, stride)
		for i := range n {
			if want := src[i/bs*stride+i%bs]; dst[i] != want {
				t.Fatalf("bs %d stride %d blocks %d n %d: byte %d is %d, want %d", bs, stride, blocks, n, i, dst[i], want)
			}
		}
		if dst[n] != 0 || dst[n+1] != 0 || dst[n+2] != 0 {
			t.Fatalf("bs %d stride %d n %d: wrote past dst", bs, stride, n)
		}
	}
}

// TestCopyGather: CopyGather, and CopyGatherMore with up to 3 further
// destinations: the blocks land in every destination, each of which may
// hold one of the sources in place (at its own block: left as it is);
// nothing past the blocks.
func TestCopyGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 80 {
		bs := 1 + rng.IntN(3*parreduce.ChunkBytes)
		if rng.IntN(2) == 0 {
			bs = 1 + rng.IntN(64)
		}
		blocks, extra := 1+rng.IntN(9), rng.IntN(4)
		nb := blocks * bs
		dsts := make([][]byte, 1+extra)
		for d := range dsts {
			dsts[d] = make([]byte, nb+3)
		}
		srcs := make([][]byte, blocks)
		want := make([]byte, nb)
		for i := range srcs {
			srcs[i] = make([]byte, bs)
			if d := rng.IntN(len(dsts) + 1); d < len(dsts) {
				srcs[i] = dsts[d][i*bs : (i+1)*bs] // in place in destination d
			}
			for k := range srcs[i] {
				srcs[i][k] = byte(rng.Uint32())
			}
			copy(want[i*bs:], srcs[i])
		}
		if extra == 0 {
			CopyGather(dsts[0][:nb], srcs, bs)
		} else {
			more := make([][]byte, extra)
			for d := range more {
				more[d] = dsts[1+d][:nb]
			}
			CopyGatherMore(dsts[0][:nb], more, srcs, bs)
		}
		for d, dst := range dsts {
			if !bytes.Equal(dst[:nb], want) {
				t.Fatalf("bs %d blocks %d, destination %d of %d: the blocks differ", bs, blocks, d, len(dsts))
			}
			if dst[nb] != 0 || dst[nb+1] != 0 || dst[nb+2] != 0 {
				t.Fatalf("bs %d blocks %d, destination %d: wrote past the blocks", bs, blocks, d)
			}
		}
	}
}
