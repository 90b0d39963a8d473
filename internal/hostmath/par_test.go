package hostmath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// specials are bit patterns of each float type worth meeting in a
// reduction: quiet and signalling NaNs with payloads, infinities, signed
// zeros, the smallest and largest subnormals and normals.
var specials = map[backend.DType][]uint64{
	backend.F32: {0x7fc00000, 0x7f800001, 0xffc00123, 0x7f800000, 0xff800000, 0, 0x80000000, 1, 0x80000001,
		0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff},
	backend.F64: {0x7ff8000000000000, 0x7ff0000000000001, 0xfff8000000000123, 0x7ff0000000000000,
		0xfff0000000000000, 0, 1 << 63, 1, 1<<63 | 1, 0x000fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff},
	backend.Half:     {0x7e00, 0x7c01, 0xfe01, 0x7c00, 0xfc00, 0, 0x8000, 1, 0x8001, 0x03ff, 0x0400, 0x7bff},
	backend.BFloat16: {0x7fc0, 0x7f81, 0xffc1, 0x7f80, 0xff80, 0, 0x8000, 1, 0x8001, 0x007f, 0x0080, 0x7f7f},
	backend.F8E4M3:   {0x7f, 0xff, 0, 0x80, 1, 0x81, 0x07, 0x08, 0x7e, 0xfe},
	backend.F8E5M2:   {0x7e, 0x7d, 0xff, 0x7c, 0xfc, 0, 0x80, 1, 0x81, 0x03, 0x04, 0x7b},
}

// fill sets b to random elements of dt, a quarter of them special values
// for the float types.
func fill(rng *rand.Rand, dt backend.DType, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	sp, es := specials[dt], dt.Size()
	if len(sp) == 0 {
		return
	}
	var w [8]byte
	for i := 0; i+es <= len(b); i += es {
		if rng.IntN(4) == 0 {
			binary.LittleEndian.PutUint64(w[:], sp[rng.IntN(len(sp))])
			copy(b[i:i+es], w[:es])
		}
	}
}

// reduceBoth runs ReduceStrided serially (parreduce.Reduce capped at 1)
// and in chunks (capped at limit) on copies of src, out of place and in
// place on input 0, and reports the first difference of their bytes.
func reduceBoth(dt backend.DType, op backend.Op, src []byte, stride, off, k, cnt int, scale float64, limit int) error {
	defer parreduce.Reduce.Set(parreduce.Reduce.Set(0))
	es := dt.Size()
	var outs [2][2][]byte // [serial, chunked][out of place, in place]
	for m, cap := range []int{1, limit} {
		parreduce.Reduce.Set(cap)
		in := bytes.Clone(src)
		dst := make([]byte, cnt*es+es) // one element past the end that must stay 0
		ReduceStrided(dt, op, dst[:cnt*es], in, stride, off, k, cnt, scale)
		if !bytes.Equal(in, src) {
			return fmt.Errorf("cap %d: the inputs changed", cap)
		}
		outs[m][0] = dst
		ReduceStrided(dt, op, in[off*es:(off+cnt)*es], in, stride, off, k, cnt, scale)
		outs[m][1] = in
	}
	for w, what := range []string{"out of place", "in place"} {
		a, b := outs[0][w], outs[1][w]
		if i := firstDiff(a, b); i >= 0 {
			return fmt.Errorf("%s: element %d (byte %d): serial % x, chunked % x", what, i/es, i,
				a[i/es*es:i/es*es+es], b[i/es*es:i/es*es+es])
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestReduceStridedChunkedBitwise: ReduceStrided in chunks on the worker
// pool gives the serial reduction's bytes for every type, op and scale on
// random data with NaNs (payloads kept), infinities, signed zeros and
// subnormals, for counts around the chunk boundaries (chunks shrunk to 64
// bytes), 1 to 8 inputs, strides and offsets, in place and out of place.
func TestReduceStridedChunkedBitwise(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	defer func(b int) { chunkBytes = b }(chunkBytes)
	chunkBytes = 64
	for dt := range backend.DType(backend.NumDTypes) {
		es := dt.Size()
		c := chunkBytes / es
		for op := range backend.Op(backend.NumOps) {
			if !op.Defined(dt) {
				continue
			}
			for _, cnt := range []int{1, c - 1, c, c + 1, 2*c - 1, 2 * c, 2*c + 1, 3 * c, 5*c + 7, 97*c + 3} {
				k := []int{1, 2, 3, 5, 8}[rng.IntN(5)]
				scales := []float64{1, 1 / float64(k)}
				if !dt.IsInt() {
					scales = append(scales, 0.3)
				}
				for _, scale := range scales {
					off := rng.IntN(3)
					stride := cnt + off + rng.IntN(3)
					src := make([]byte, (k*stride+off+cnt)*es)
					fill(rng, dt, src)
					limit := []int{0, 2, 3}[rng.IntN(3)]
					if err := reduceBoth(dt, op, src, stride, off, k, cnt, scale, limit); err != nil {
						t.Fatalf("seed %d: %v %v k=%d cnt=%d stride=%d off=%d scale=%v cap %d: %v",
							seed, dt, op, k, cnt, stride, off, scale, limit, err)
					}
				}
			}
		}
	}
}

// TestReduceStridedChunkedFullSize: the same at the real chunk size, for
// a count of two and a half chunks.
func TestReduceStridedChunkedFullSize(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, dt := range []backend.DType{backend.F32, backend.U8, backend.BFloat16, backend.F64} {
		es := dt.Size()
		cnt := 5 * chunkBytes / es / 2
		k := 3
		src := make([]byte, k*cnt*es)
		fill(rng, dt, src)
		if err := reduceBoth(dt, backend.Sum, src, cnt, 0, k, cnt, 1/float64(k), 0); err != nil {
			t.Fatalf("seed %d: %v: %v", seed, dt, err)
		}
	}
}

// TestReduceStridedChunkedAllocs: a chunked ReduceStrided allocates
// nothing once warm.
func TestReduceStridedChunkedAllocs(t *testing.T) {
	const cnt, k = 1 << 18, 4 // 1 MiB of float32 per input
	src := make([]byte, k*cnt*4)
	dst := make([]byte, cnt*4)
	f := func() { ReduceStrided(backend.F32, backend.Sum, dst, src, cnt, 0, k, cnt, 1) }
	f()
	if a := testing.AllocsPerRun(20, f); a != 0 {
		t.Errorf("ReduceStrided of %d chunks: %v allocations per call, want 0", cnt*4/chunkBytes, a)
	}
}

// BenchmarkReduceStrided: float32 sum of k inputs of 1, 16 and 64 MiB,
// serial (parreduce.Reduce capped at 1) against chunked on the pool; the
// bytes are the inputs read.
func BenchmarkReduceStrided(b *testing.B) {
	defer parreduce.Reduce.Set(parreduce.Reduce.Set(0))
	for _, k := range []int{2, 4} {
		for _, mib := range []int{1, 16, 64} {
			cnt := mib << 20 / 4
			src := make([]byte, k*cnt*4)
			for i := range src {
				src[i] = byte(i * 7)
			}
			dst := make([]byte, cnt*4)
			for _, mode := range []struct {
				name string
				cap  int
			}{{"serial", 1}, {"parallel", 0}} {
				b.Run(fmt.Sprintf("k=%d/%dMiB/%s", k, mib, mode.name), func(b *testing.B) {
					parreduce.Reduce.Set(mode.cap)
					b.SetBytes(int64(k * cnt * 4))
					for b.Loop() {
						ReduceStrided(backend.F32, backend.Sum, dst, src, cnt, 0, k, cnt, 1)
					}
				})
			}
		}
	}
}
