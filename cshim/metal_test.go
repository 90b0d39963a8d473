//go:build darwin && cgo && !nometal

package cshim

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

// openMetal opens Metal device 0 or skips (fails with GOCOLL_BACKEND=metal,
// as in the macOS CI workflow).
func openMetal(t testing.TB, opts OpenOptions) *Device {
	t.Helper()
	impl := Metal()
	err := impl.Init(InitOptions{})
	var devs []DeviceInfo
	if err == nil {
		devs, err = impl.Devices()
	}
	if err == nil && (len(devs) == 0 || !devs[0].Usable) {
		err = errors.New("no usable Metal device")
		if len(devs) > 0 {
			err = errors.New(devs[0].Name + ": " + devs[0].UnusableReason)
		}
	}
	if err != nil {
		if strings.EqualFold(os.Getenv("GOCOLL_BACKEND"), "metal") {
			t.Fatalf("GOCOLL_BACKEND=metal needs a usable Metal device: %v", err)
		}
		t.Skipf("no usable Metal here: %v", err)
	}
	d, err := impl.Open(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func metalScaleKernel(t testing.TB, d *Device, scale bool) *Kernel {
	t.Helper()
	info, _ := kernels.Lookup(kernels.ScaleF32)
	msl, err := kernels.MSL(kernels.ScaleF32)
	if err != nil {
		t.Fatal(err)
	}
	code, entry, err := MetalKernel(msl, info.Bindings)
	if err != nil {
		t.Fatal(err)
	}
	sc := uint32(0)
	if scale {
		sc = 1
	}
	k, err := d.NewKernel(KernelDesc{SPIRV: code, Entry: entry, PushBytes: info.PushConstantBytes, Bindings: info.Bindings,
		Spec: []SpecConstant{{ID: kernels.SpecWorkGroupSize, Value: 64}, {ID: kernels.SpecScale, Value: sc}}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// metalScalePush fills scale_f32's push constants (n, dst_off 0, src_off 0,
// pad, scale); this file does not share cshim_test.go's helpers, which are
// left out with -tags novulkan.
func metalScalePush(p []byte, n uint32, scale float32) []byte {
	clear(p)
	binary.NativeEndian.PutUint32(p[0:], n)
	binary.NativeEndian.PutUint32(p[16:], math.Float32bits(scale))
	return p[:20]
}

// TestMetalTableFilled: the run-time twin of TestMetalTable.
func TestMetalTableFilled(t *testing.T) {
	impl := Metal()
	if impl.Name() != "metal" || impl.missingEntries() != 0 || impl.abiVersion() != ABIVersion {
		t.Errorf("Metal(): name %q, %d NULL entries, ABI %d (want %d)", impl.Name(), impl.missingEntries(), impl.abiVersion(), ABIVersion)
	}
}

// TestMetalDispatchAndTickets: the scale kernel through MetalKernel, with
// push constants after the bindings, several submissions in flight, and
// timestamps from the command buffers' GPUEndTime.
func TestMetalDispatchAndTickets(t *testing.T) {
	d := openMetal(t, OpenOptions{RingSize: 2, TimestampQueries: 2})
	k := metalScaleKernel(t, d, true)
	const n = 1000
	src, err := d.NewBuffer(4*n, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.NewBuffer(4*n, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)
	}
	for i, x := range in {
		binary.NativeEndian.PutUint32(src.Bytes()[4*i:], math.Float32bits(x))
	}
	push := make([]byte, MaxPushBytes)
	var last uint64
	for round := 0; round < 5; round++ {
		if round == 0 {
			if err := d.CmdTimestamp(0); err != nil {
				t.Fatal(err)
			}
		}
		b := []Binding{{Buffer: dst, Range: 4 * n}, {Buffer: src, Range: 4 * n}}
		if err := d.CmdDispatch(k, [3]uint32{(n + 63) / 64, 1, 1}, b, metalScalePush(push, n, float32(round+1))); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if err := d.CmdTimestamp(1); err != nil {
				t.Fatal(err)
			}
		}
		tk, err := d.Submit()
		if err != nil {
			t.Fatal(err)
		}
		if tk != last+1 {
			t.Fatalf("ticket %d after %d", tk, last)
		}
		last = tk
	}
	if ok, err := d.Wait(last, 10*time.Second); !ok || err != nil {
		t.Fatalf("Wait: %v %v", ok, err)
	}
	for i := 0; i < n; i++ {
		if v := math.Float32frombits(binary.NativeEndian.Uint32(dst.Bytes()[4*i:])); v != float32(i)*5 {
			t.Fatalf("dst[%d] = %v, want %v", i, v, float32(i)*5)
		}
	}
	ts := make([]uint64, 2)
	if ok, err := d.ReadTimestamps(0, ts); !ok || err != nil || ts[1] < ts[0] {
		t.Errorf("timestamps %v (%v, %v)", ts, ok, err)
	}
}

// TestMetalCopyNowUnaligned: copies at byte offsets (the copy kernel) and at
// word offsets (a blit) between private and shared memory.
func TestMetalCopyNowUnaligned(t *testing.T) {
	d := openMetal(t, OpenOptions{})
	a, _ := d.NewBuffer(4096, backend.HostVisible)
	p, _ := d.NewBuffer(4096, backend.DeviceLocal)
	c, _ := d.NewBuffer(4096, backend.HostVisible)
	for i := range a.Bytes() {
		a.Bytes()[i] = byte(i * 13)
	}
	for _, x := range []struct{ src, dst, n int64 }{{1, 3, 7}, {0, 0, 4096}, {4093, 5, 3}, {8, 16, 1024}} {
		if err := d.CopyNow(p, x.dst, a, x.src, x.n); err != nil {
			t.Fatal(err)
		}
		if err := d.CopyNow(c, 0, p, x.dst, x.n); err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < x.n; i++ {
			if c.Bytes()[i] != a.Bytes()[x.src+i] {
				t.Fatalf("copy %+v: byte %d differs", x, i)
			}
		}
	}
}
