//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
)

var wireFormats = []backend.WireFormat{backend.F16, backend.BF16}

func hostToWire(f backend.WireFormat, x float32) uint16 {
	if f == backend.BF16 {
		return host.F32ToBF16(x)
	}
	return host.F32ToF16(x)
}

func hostFromWire(f backend.WireFormat, h uint16) float32 {
	if f == backend.BF16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	return host.F16ToF32(h)
}

// packInputs returns f32 bit patterns that exercise both conversions: edge
// values, every half value with the patterns just around its rounding
// midpoints, and random bit patterns.
func packInputs(random int) []uint32 {
	in := []uint32{
		0, 0x80000000, // +-0
		1, 0x80000001, 0x007fffff, 0x00400000, 0x00800000, 0x80800000, // f32 subnormals, min normal
		0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0xb3000000, 0xb3000001, // around half's 2^-24, halfway to 0
		0x33c00000, 0x34200000, 0x387fc000, 0x387fe000, 0x387ff000, 0x38800000, // half subnormals, up to min normal
		0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0xc77ff000, 0x47800000, // half max finite, overflow threshold
		0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, // f32 max, bfloat16 overflow
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, // bfloat16 ties
		0x7f800000, 0xff800000, // +-Inf
		0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0x7fa00000, 0x7f802000, // NaNs, payloads
	}
	for h := 0; h < 1<<16; h++ {
		f := host.F16ToF32(uint16(h))
		if f != f {
			continue
		}
		b := math.Float32bits(f)
		in = append(in, b, b+0x1000, b+0xfff, b+0x1001, b+0x8000)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < random; i++ {
		in = append(in, rng.Uint32())
	}
	return in
}

func packRef(f backend.WireFormat, src []uint32) []byte {
	out := make([]byte, (2*len(src)+3)&^3)
	for i, b := range src {
		binary.LittleEndian.PutUint16(out[2*i:], hostToWire(f, math.Float32frombits(b)))
	}
	return out
}

func u32Bytes(v []uint32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

func readBytes(t testing.TB, b backend.Buffer, off, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := b.Read(off, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestPackUnpack: Pack gives the bits of host.F32ToF16 / F32ToBF16 on
// edge values, every half value and the patterns around its rounding
// midpoints, and a few hundred thousand random bit patterns; Unpack gives
// the bits of host.F16ToF32 / the bfloat16 shift for every 16-bit pattern.
// Packed regions sit on and off 4-byte boundaries, counts are odd and even.
func TestPackUnpack(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	s := d.Stream().(*stream)
	in := packInputs(200000)
	all := make([]uint32, 1<<16)
	for i := range all {
		all[i] = uint32(i)
	}
	for _, f := range wireFormats {
		for _, c := range []struct {
			n         int
			srcOff    int // bytes
			packedOff int
		}{{len(in), 0, 0}, {len(in) - 1, 12, 6}, {1, 4, 2}, {2, 0, 1}, {3, 16, 3}, {7, 20, 4}} {
			src := in[:c.n]
			plen := (2*c.n + 3) &^ 3
			sb := alloc(t, d, c.srcOff+4*c.n, backend.HostVisible)
			copy(sb.Bytes()[c.srcOff:], u32Bytes(src))
			pb := alloc(t, d, c.packedOff+plen+8, backend.DeviceLocal)
			// Fill around the packed region, to see that nothing outside it changes.
			fill := make([]byte, pb.Len())
			for i := range fill {
				fill[i] = 0xa5
			}
			if err := pb.Write(0, fill); err != nil {
				t.Fatal(err)
			}
			before := d.Counters().Snapshot()
			packed := backend.Region{Buf: pb, Off: c.packedOff, Len: plen}
			if err := s.Pack(f, packed, backend.Region{Buf: sb, Off: c.srcOff, Len: 4 * c.n}); err != nil {
				t.Fatal(err)
			}
			wait(t, s)
			what := fmt.Sprintf("%s n=%d packed at %d", f, c.n, c.packedOff)
			if got := d.Counters().Snapshot().Sub(before); got.BytesReduced != int64(plen) || got.Dispatches != 1 {
				t.Errorf("%s: %d dispatches, BytesReduced %d, want 1 and %d", what, got.Dispatches, got.BytesReduced, plen)
			}
			got := readBytes(t, pb, 0, pb.Len())
			want := append(append(fill[:c.packedOff:c.packedOff], packRef(f, src)...), fill[c.packedOff+plen:]...)
			if i := firstDiff(got, want); i >= 0 {
				j := (i - c.packedOff) / 2
				t.Fatalf("%s: byte %d differs (element %d, %#08x): got %#x, want %#x", what, i, j, src[min(max(j, 0), c.n-1)], got[i], want[i])
			}
			// Unpack what Pack made, into an f32 region off its alignment.
			ub := alloc(t, d, 8+4*c.n, backend.DeviceLocal)
			if err := s.Unpack(f, backend.Region{Buf: ub, Off: 4, Len: 4 * c.n}, packed); err != nil {
				t.Fatal(err)
			}
			wait(t, s)
			back := readBytes(t, ub, 4, 4*c.n)
			for i := 0; i < c.n; i++ {
				h := binary.LittleEndian.Uint16(want[c.packedOff+2*i:])
				wb := math.Float32bits(hostFromWire(f, h))
				if gb := binary.LittleEndian.Uint32(back[4*i:]); gb != wb {
					t.Fatalf("%s: unpack of %#04x = %#08x, want %#08x", what, h, gb, wb)
				}
			}
		}
		// Unpack every 16-bit pattern.
		pb := alloc(t, d, 4+2*len(all), backend.HostVisible)
		for i, h := range all {
			binary.LittleEndian.PutUint16(pb.Bytes()[4+2*i:], uint16(h))
		}
		ub := alloc(t, d, 4*len(all), backend.HostVisible)
		if err := s.Unpack(f, backend.Region{Buf: ub, Len: 4 * len(all)}, backend.Region{Buf: pb, Off: 4, Len: 2 * len(all)}); err != nil {
			t.Fatal(err)
		}
		wait(t, s)
		for i, h := range all {
			want := math.Float32bits(hostFromWire(f, uint16(h)))
			if got := binary.LittleEndian.Uint32(ub.Bytes()[4*i:]); got != want {
				t.Fatalf("%s: unpack of %#04x = %#08x, want %#08x", f, h, got, want)
			}
		}
	}
}

// TestPackSplit: with a small binding limit, Pack and Unpack split into
// several dispatches (even element counts but the last) and still give the
// host's bits, aligned or not.
func TestPackSplit(t *testing.T) {
	const limit = 4096
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: limit})
	s := d.Stream().(*stream)
	in := packInputs(0)[:5001]
	for _, f := range wireFormats {
		for _, off := range []int{0, 4, 8, 12, 2} {
			n := len(in)
			plen := (2*n + 3) &^ 3
			b := alloc(t, d, 2*off+4*n+plen+64, backend.DeviceLocal)
			src := backend.Region{Buf: b, Off: off &^ 3, Len: 4 * n}
			packed := backend.Region{Buf: b, Off: src.Off + src.Len + off, Len: plen}
			if err := b.Write(src.Off, u32Bytes(in)); err != nil {
				t.Fatal(err)
			}
			before := d.Counters().Snapshot()
			if err := s.Pack(f, packed, src); err != nil {
				t.Fatal(err)
			}
			out := backend.Region{Buf: alloc(t, d, 4*n+off, backend.DeviceLocal), Off: off &^ 3, Len: 4 * n}
			if err := s.Unpack(f, out, packed); err != nil {
				t.Fatal(err)
			}
			wait(t, s)
			got := d.Counters().Snapshot().Sub(before)
			fewest := int64(2 * ((4*n + limit - 1) / limit))
			if got.Dispatches < fewest || got.BytesReduced != int64(plen+4*n) {
				t.Errorf("%s off %d: %d dispatches, BytesReduced %d; want at least %d and %d", f, off, got.Dispatches, got.BytesReduced, fewest, plen+4*n)
			}
			want := packRef(f, in)
			if i := firstDiff(readBytes(t, b, packed.Off, plen), want); i >= 0 {
				t.Fatalf("%s off %d: packed byte %d differs", f, off, i)
			}
			back := readBytes(t, out.Buf, out.Off, out.Len)
			for i := 0; i < n; i++ {
				w := math.Float32bits(hostFromWire(f, binary.LittleEndian.Uint16(want[2*i:])))
				if g := binary.LittleEndian.Uint32(back[4*i:]); g != w {
					t.Fatalf("%s off %d: element %d unpacked to %#08x, want %#08x", f, off, i, g, w)
				}
			}
		}
	}
}

// topKRef is an independent reference: the k-th largest key by a sort,
// then the elements above it and the lowest-indexed ones equal to it.
type topKRef[T float] struct {
	x            []T
	keys, sorted []float64
}

func newTopKRef[T float](x []T) *topKRef[T] {
	r := &topKRef[T]{x: x, keys: make([]float64, len(x))}
	for i, v := range x {
		f := float64(v)
		if f != f {
			f = math.Inf(1) // NaN ties with +-Inf, as on the host
		}
		r.keys[i] = math.Abs(f)
	}
	r.sorted = slices.Clone(r.keys)
	slices.Sort(r.sorted)
	return r
}

func (r *topKRef[T]) selectK(k int) ([]uint32, []T) {
	n := len(r.x)
	thr := r.sorted[n-k]
	above := n - k
	for above < n && r.sorted[above] == thr {
		above++
	}
	ties := k - (n - above)
	idx := make([]uint32, 0, k)
	val := make([]T, 0, k)
	for i, kv := range r.keys {
		if kv > thr || kv == thr && ties > 0 {
			if kv == thr {
				ties--
			}
			idx = append(idx, uint32(i))
			val = append(val, r.x[i])
		}
	}
	return idx, val
}

// topKData returns n elements of a kind: "normal" (random normals with NaN,
// +-Inf and -0 sprinkled in), "ties" (small integers, many equal
// magnitudes, -0 among them), "bits" (random bit patterns: NaNs with
// payloads, subnormals, every exponent).
func topKData[T float](kind string, n int, rng *rand.Rand) []T {
	x := make([]T, n)
	for i := range x {
		switch kind {
		case "normal":
			x[i] = T(rng.NormFloat64())
			switch rng.IntN(200) {
			case 0:
				x[i] = T(math.NaN())
			case 1:
				x[i] = T(math.Inf(1 - 2*rng.IntN(2)))
			case 2:
				x[i] = T(math.Copysign(0, -1))
			}
		case "ties":
			x[i] = T(rng.IntN(9) - 4)
			if x[i] == 0 && rng.IntN(2) == 0 {
				x[i] = T(math.Copysign(0, -1))
			}
		case "bits":
			if dtypeOf[T]() == backend.F64 {
				x[i] = T(math.Float64frombits(rng.Uint64()))
			} else {
				x[i] = T(math.Float32frombits(rng.Uint32()))
			}
		}
	}
	return x
}

// TestTopK: the device's selection equals the reference selection (and the
// host backend's, bit for bit) for f32 and f64, n from 1 to 2^20+3, k of 1,
// a middle value and n, with NaN, Inf, -0 and many ties. The race run
// (-short) leaves out n = 2^20+3: the 65537-element selections already run
// every stage of the kernels over several blocks, and the race detector
// slows the Go reference of the largest tenfold.
func TestTopK(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	hd, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	t.Run("f32", func(t *testing.T) { testTopK[float32](t, d, hd) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		testTopK[float64](t, d, hd)
	})
}

func testTopK[T float](t *testing.T, d *device, hd backend.Device) {
	dt := dtypeOf[T]()
	es := int(dt.Size())
	s := d.Stream()
	rng := rand.New(rand.NewPCG(3, uint64(es)))
	for _, n := range []int{1, 2, 1000, 65537, 1<<20 + 3} {
		if n > 1<<20 && raceEnabled && testing.Short() && !fullRun() {
			continue
		}
		kinds := []string{"normal", "ties", "bits"}
		if n == 1<<20+3 {
			kinds = []string{"normal", "ties"}
		}
		for _, kind := range kinds {
			x := topKData[T](kind, n, rng)
			sb := alloc(t, d, es*(n+3), backend.HostVisible)
			copy(sb.Bytes()[3*es:], asBytes(x))
			src := backend.Region{Buf: sb, Off: 3 * es, Len: n * es}
			ref := newTopKRef(x)
			for _, k := range slices.Compact([]int{1, n/3 + 1, n}) {
				what := fmt.Sprintf("%s n=%d k=%d", kind, n, k)
				ib := alloc(t, d, 4*k+8, backend.DeviceLocal)
				vb := alloc(t, d, es*(k+1), backend.HostVisible)
				ioff := 4
				if k == 1 && n == 1000 {
					ioff = 6 // idx on no 4-byte boundary: through the temporary buffer
				}
				idx := backend.Region{Buf: ib, Off: ioff, Len: 4 * k}
				val := backend.Region{Buf: vb, Off: es, Len: es * k}
				if err := s.(backend.Compressor).TopK(dt, src, k, idx, val); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				wait(t, s)
				gotIdx := readBytes(t, ib, ioff, 4*k)
				gotVal := get[T](t, vb, es, k)
				wantIdx, wantVal := ref.selectK(k)
				for j := range wantIdx {
					if g := binary.LittleEndian.Uint32(gotIdx[4*j:]); g != wantIdx[j] {
						t.Fatalf("%s: idx[%d] = %d, want %d", what, j, g, wantIdx[j])
					}
				}
				for j := range wantVal {
					if !sameBits(gotVal[j], wantVal[j]) || !sameBits(gotVal[j], x[wantIdx[j]]) {
						t.Fatalf("%s: val[%d] = %v, want %v", what, j, gotVal[j], wantVal[j])
					}
				}
				// The host backend's own selection (a stable sort), where it is quick.
				if n <= 1000 || n == 65537 && kind == "ties" && k != n {
					checkHostTopK(t, hd, dt, x, k, gotIdx, asBytes(gotVal))
				}
			}
		}
	}
}

// TestTopKBatched: several selections recorded into one submission, the
// later ones growing the stream's work and temporary buffers while the
// earlier ones still use them.
func TestTopKBatched(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	s := d.Stream()
	rng := rand.New(rand.NewPCG(9, 10))
	type job struct {
		x   []float32
		k   int
		idx backend.Region
		val backend.Region
	}
	var jobs []job
	for _, c := range []struct{ n, k int }{{1000, 10}, {200000, 5}, {300000, 3000}} {
		x := topKData[float32]("normal", c.n, rng)
		src := backend.Region{Buf: alloc(t, d, 4*c.n, backend.HostVisible), Len: 4 * c.n}
		copy(src.Buf.Bytes(), asBytes(x))
		j := job{x: x, k: c.k,
			idx: backend.Region{Buf: alloc(t, d, 4*c.k+2, backend.HostVisible), Off: 2, Len: 4 * c.k},
			val: backend.Region{Buf: alloc(t, d, 4*c.k, backend.HostVisible), Len: 4 * c.k}}
		if err := s.(backend.Compressor).TopK(backend.F32, src, c.k, j.idx, j.val); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	wait(t, s)
	for _, j := range jobs {
		want, _ := newTopKRef(j.x).selectK(j.k)
		got := j.idx.Buf.Bytes()[j.idx.Off:]
		for i, w := range want {
			if g := binary.LittleEndian.Uint32(got[4*i:]); g != w {
				t.Fatalf("n=%d k=%d: idx[%d] = %d, want %d", len(j.x), j.k, i, g, w)
			}
		}
	}
}

// checkHostTopK runs the host backend's TopK and compares its bytes.
func checkHostTopK[T float](t *testing.T, hd backend.Device, dt backend.DType, x []T, k int, idx, val []byte) {
	t.Helper()
	es := int(dt.Size())
	hb, err := hd.Alloc(len(x)*es+4*k+k*es, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	copy(hb.Bytes(), asBytes(x))
	hv := backend.Region{Buf: hb, Off: len(x) * es, Len: k * es}
	hi := backend.Region{Buf: hb, Off: (len(x) + k) * es, Len: 4 * k}
	if err := hd.Stream().(backend.Compressor).TopK(dt, backend.Region{Buf: hb, Len: len(x) * es}, k, hi, hv); err != nil {
		t.Fatal(err)
	}
	wait(t, hd.Stream())
	if firstDiff(idx, hb.Bytes()[hi.Off:hi.Off+hi.Len]) >= 0 || firstDiff(val, hb.Bytes()[hv.Off:hv.Off+hv.Len]) >= 0 {
		t.Fatalf("n=%d k=%d: the host backend's selection differs", len(x), k)
	}
}

// TestCompressErrors: arguments are checked as the host checks them.
func TestCompressErrors(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: 1 << 16, DisableFloat64: true})
	a := alloc(t, d, 1<<18, backend.HostVisible)
	r := func(off, n int) backend.Region { return backend.Region{Buf: a, Off: off, Len: n} }
	s := d.Stream().(*stream)
	cases := []struct {
		name string
		err  error
	}{
		{"unknown wire", s.Pack(backend.WireFormat(9), r(0, 8), r(64, 16))},
		{"pack dst length", s.Pack(backend.F16, r(0, 6), r(64, 12))},
		{"pack odd src", s.Pack(backend.F16, r(0, 8), r(66, 12))},
		{"pack overlap", s.Pack(backend.F16, r(64, 8), r(60, 16))},
		{"unpack src length", s.Unpack(backend.BF16, r(64, 12), r(0, 6))},
		{"unpack dst misaligned", s.Unpack(backend.BF16, r(66, 12), r(0, 8))},
		{"unpack overlap", s.Unpack(backend.F16, r(0, 12), r(8, 8))},
		{"outside buffer", s.Pack(backend.F16, r(1<<18-4, 8), r(0, 16))},
		{"k=0", s.TopK(backend.F32, r(0, 16), 0, r(64, 0), r(128, 0))},
		{"k>n", s.TopK(backend.F32, r(0, 16), 5, r(64, 20), r(128, 20))},
		{"idx length", s.TopK(backend.F32, r(0, 16), 2, r(64, 4), r(128, 8))},
		{"val length", s.TopK(backend.F32, r(0, 16), 2, r(64, 8), r(128, 4))},
		{"val misaligned", s.TopK(backend.F32, r(0, 16), 2, r(64, 8), r(130, 8))},
		{"unknown dtype", s.TopK(backend.DType(99), r(0, 16), 2, r(64, 8), r(128, 8))},
		{"topk overlap", s.TopK(backend.F32, r(0, 16), 2, r(8, 8), r(128, 8))},
	}
	for _, c := range cases {
		if !errors.Is(c.err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, c.err)
		}
	}
	if err := s.TopK(backend.F64, r(0, 16), 1, r(64, 4), r(128, 8)); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("f64 TopK without Float64: %v, want ErrUnsupported", err)
	}
	if err := s.TopK(backend.F32, r(0, 1<<16+4), 1, r(1<<17, 4), r(1<<17+64, 4)); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("TopK of more than a binding: %v, want ErrUnsupported", err)
	}
	if s.Recorded() {
		t.Error("a failed call recorded work")
	}
	// Empty conversions record nothing.
	if err := s.Pack(backend.F16, r(0, 0), r(64, 0)); err != nil {
		t.Error(err)
	}
	if err := s.Unpack(backend.F16, r(0, 0), r(64, 0)); err != nil {
		t.Error(err)
	}
	if s.Recorded() {
		t.Error("an empty conversion recorded work")
	}
}

// TestCompressSteadyState: once pipelines and scratch exist, Pack, Unpack
// and TopK + Submit + Wait allocate no Go memory and create no Vulkan
// object.
func TestCompressSteadyState(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: 64 << 10})
	// Pack and Unpack split into pieces; TopK's src fits one binding.
	const n, m, k = 50001, 16001, 1000
	x := topKData[float32]("normal", n, rand.New(rand.NewPCG(5, 6)))
	src := backend.Region{Buf: alloc(t, d, 4*n, backend.HostVisible), Len: 4 * n}
	copy(src.Buf.Bytes(), asBytes(x))
	tsrc := backend.Region{Buf: src.Buf, Off: 4 * (n - m), Len: 4 * m}
	packed := backend.Region{Buf: alloc(t, d, (2*n+3)&^3+2, backend.DeviceLocal), Off: 2, Len: (2*n + 3) &^ 3}
	wide := backend.Region{Buf: alloc(t, d, 4*n, backend.DeviceLocal), Len: 4 * n}
	idx := backend.Region{Buf: alloc(t, d, 4*k, backend.DeviceLocal), Len: 4 * k}
	val := backend.Region{Buf: alloc(t, d, 4*k, backend.DeviceLocal), Len: 4 * k}
	s := d.Stream()
	c := s.(backend.Compressor)
	ctx := context.Background()
	var runErr error
	run := func() {
		for _, err := range []error{
			c.Pack(backend.BF16, packed, src),
			c.Unpack(backend.BF16, wide, packed),
			c.TopK(backend.F32, tsrc, k, idx, val),
		} {
			if err != nil {
				runErr = err
				return
			}
		}
		f, err := s.Submit()
		if err == nil {
			err = f.Wait(ctx)
		}
		if err != nil {
			runErr = err
		}
	}
	run()
	before := d.Counters().Snapshot()
	allocs := testing.AllocsPerRun(20, run)
	if runErr != nil {
		t.Fatal(runErr)
	}
	after := d.Counters().Snapshot().Sub(before)
	if allocs != 0 && !asanEnabled {
		t.Errorf("%v Go allocations per Pack+Unpack+TopK+Submit+Wait, want 0", allocs)
	}
	if after.ObjectsCreated != 0 {
		t.Errorf("%d Vulkan objects created in steady state, want 0", after.ObjectsCreated)
	}
	wantIdx, _ := newTopKRef(x[n-m:]).selectK(k)
	got := readBytes(t, idx.Buf, 0, 4*k)
	for j, w := range wantIdx {
		if g := binary.LittleEndian.Uint32(got[4*j:]); g != w {
			t.Fatalf("idx[%d] = %d, want %d", j, g, w)
		}
	}
	t.Logf("per iteration: %d dispatches, %d copies, 0 allocations, 0 objects", after.Dispatches/21, after.Copies/21)
}

// TestTopKTiming logs what one large selection takes (no assertion).
func TestTopKTiming(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n = 1 << 20
	x := topKData[float32]("normal", n, rand.New(rand.NewPCG(7, 8)))
	src := backend.Region{Buf: alloc(t, d, 4*n, backend.DeviceLocal), Len: 4 * n}
	put(t, src.Buf, 0, x)
	k := n / 100
	idx := backend.Region{Buf: alloc(t, d, 4*k, backend.DeviceLocal), Len: 4 * k}
	val := backend.Region{Buf: alloc(t, d, 4*k, backend.DeviceLocal), Len: 4 * k}
	s := d.Stream()
	for i := 0; i < 3; i++ {
		start := time.Now()
		if err := s.(backend.Compressor).TopK(backend.F32, src, k, idx, val); err != nil {
			t.Fatal(err)
		}
		wait(t, s)
		if i == 2 {
			t.Logf("TopK of %d f32, k=%d: %v", n, k, time.Since(start))
		}
	}
}
