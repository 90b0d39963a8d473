package host_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
)

// TestHalfRoundTrip: every binary16 value converts to f32 and back to
// itself (NaNs stay NaN).
func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := host.F16ToF32(uint16(h))
		back := host.F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// nearest checks that h is the representable value nearest to x, ties to
// the even encoding, by comparing with its neighbours in float64.
func nearest(t *testing.T, name string, x float32, h uint16, toF32 func(uint16) float32, maxFinite float64) {
	t.Helper()
	v := float64(toF32(h))
	xf := float64(x)
	if math.IsNaN(xf) {
		if !math.IsNaN(v) {
			t.Fatalf("%s(NaN) = %v", name, v)
		}
		return
	}
	if math.IsInf(v, 0) {
		if math.Abs(xf) < maxFinite {
			t.Fatalf("%s(%v) overflowed to %v", name, x, v)
		}
		return
	}
	d := math.Abs(v - xf)
	for _, nb := range []uint16{h - 1, h + 1} {
		w := float64(toF32(nb))
		if math.IsNaN(w) || math.IsInf(w, 0) || math.Signbit(w) != math.Signbit(v) && w != 0 {
			continue
		}
		dn := math.Abs(w - xf)
		if dn < d || (dn == d && h&1 == 1) {
			t.Fatalf("%s(%v) = %#04x (%v), but %#04x (%v) is nearer or the even tie", name, x, h, v, nb, w)
		}
	}
}

func TestWireRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bf := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for i := 0; i < 200000; i++ {
		x := math.Float32frombits(rng.Uint32())
		if i%2 == 0 {
			x = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-25)))
		}
		nearest(t, "F32ToF16", x, host.F32ToF16(x), host.F16ToF32, 65520)
		nearest(t, "F32ToBF16", x, host.F32ToBF16(x), bf, math.Ldexp(2-1.0/256, 127))
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, 1e-8, 5.960464477539063e-08, 2.9802322387695312e-08} {
		nearest(t, "F32ToF16", x, host.F32ToF16(x), host.F16ToF32, 65520)
	}
}

func TestCompressorKernels(t *testing.T) {
	d, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	comp := d.Stream().(backend.Compressor)
	const n = 1001
	src, _ := d.Alloc(4*n, backend.HostVisible)
	packed, _ := d.Alloc((2*n+3)&^3, backend.DeviceLocal)
	out, _ := d.Alloc(4*n, backend.HostVisible)
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i) * 1.001
		binary.LittleEndian.PutUint32(src.Bytes()[4*i:], math.Float32bits(xs[i]))
	}
	for _, f := range []backend.WireFormat{backend.F16, backend.BF16} {
		if err := comp.Pack(f, backend.Region{Buf: packed, Len: packed.Len()}, backend.Region{Buf: src, Len: 4 * n}); err != nil {
			t.Fatal(err)
		}
		if err := comp.Unpack(f, backend.Region{Buf: out, Len: 4 * n}, backend.Region{Buf: packed, Len: packed.Len()}); err != nil {
			t.Fatal(err)
		}
		fe, err := d.Stream().Submit()
		if err != nil {
			t.Fatal(err)
		}
		if err := fe.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i, x := range xs {
			var want float32
			if f == backend.F16 {
				want = host.F16ToF32(host.F32ToF16(x))
			} else {
				want = math.Float32frombits(uint32(host.F32ToBF16(x)) << 16)
			}
			if got := math.Float32frombits(binary.LittleEndian.Uint32(out.Bytes()[4*i:])); got != want {
				t.Fatalf("%s element %d: %v, want %v", f, i, got, want)
			}
		}
	}
	if err := comp.Pack(backend.F16, backend.Region{Buf: packed, Len: 8}, backend.Region{Buf: src, Len: 4 * n}); err == nil {
		t.Error("Pack into a short region succeeded")
	}
}
