//go:build darwin && cgo && !nometal

package metal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

func alloc(t testing.TB, d backend.Device, n int, mem backend.Memory) backend.Buffer {
	t.Helper()
	b, err := d.Alloc(n, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestInfo: what the device reports: no f64 and why, zero-copy host
// import, unified memory on Apple silicon.
func TestInfo(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	in := d.Info()
	t.Logf("%+v", in)
	if in.Backend != "metal" || in.Float64 || in.Float64Reason == "" {
		t.Errorf("Info: backend %q, f64 %v (%q): want metal, no f64 with a reason", in.Backend, in.Float64, in.Float64Reason)
	}
	if !in.HostImport || in.SubgroupSize <= 0 || in.MaxWorkGroupSize <= 0 || in.MaxAllocBytes <= 0 {
		t.Errorf("Info: import %v, subgroup %d, work group %d, max alloc %d", in.HostImport, in.SubgroupSize, in.MaxWorkGroupSize, in.MaxAllocBytes)
	}
	if d.Raw().MinImportedHostPointerAlignment != uint64(backend.PageSize()) {
		t.Errorf("import alignment %d, page size %d", d.Raw().MinImportedHostPointerAlignment, backend.PageSize())
	}
}

// TestEveryPipeline compiles every kernel variant the stream can ask for
// (each op, 1..8 sources, with and without scale, the 16-byte kernels too),
// so that an MSL the Metal compiler rejects fails here by name.
func TestEveryPipeline(t *testing.T) {
	if err := openDevice(t, backend.OpenOptions{}).EveryPipeline(nil); err != nil {
		t.Fatal(err)
	}
}

// TestF64Refused: f64 kernels do not exist on Metal; the shim says so with
// ErrUnsupported even when asked directly.
func TestF64Refused(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	a := alloc(t, d, 64, backend.DeviceLocal)
	r := backend.Region{Buf: a, Len: 64}
	if err := d.Stream().Reduce(backend.Sum, backend.F64, r, []backend.Region{r}, 1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("f64 Reduce: %v, want ErrUnsupported", err)
	}
	src := []byte("#include <metal_stdlib>\nusing namespace metal;\nkernel void main0(device double* x [[buffer(0)]]) {}\n")
	for len(src)%4 != 0 {
		src = append(src, '\n')
	}
	_, err := d.Shim().NewKernel(cshim.KernelDesc{SPIRV: src, Bindings: 1})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("kernel_create of double MSL: %v, want ErrUnsupported", err)
	}
	spv, _ := kernels.SPIRV(kernels.ReduceF64)
	if _, err := d.Shim().NewKernel(cshim.KernelDesc{SPIRV: spv, Bindings: 9, PushBytes: 48}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("kernel_create of f64 SPIR-V: %v, want ErrUnsupported", err)
	}
}

// TestImport: host memory from AllocHostMemory is read and written by the
// GPU in place (newBufferWithBytesNoCopy).
func TestImport(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	mem, err := backend.AllocHostMemory(backend.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	defer backend.FreeHostMemory(mem)
	b, err := d.Import(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range mem {
		mem[i] = byte(i)
	}
	dl := alloc(t, d, len(mem), backend.DeviceLocal)
	s := d.Stream()
	must(t, s.Copy(backend.Region{Buf: dl, Len: len(mem)}, backend.Region{Buf: b, Len: len(mem)}))
	must(t, s.Copy(backend.Region{Buf: b, Off: 0, Len: 64}, backend.Region{Buf: dl, Off: 64, Len: 64}))
	f, err := s.Submit()
	must(t, err)
	must(t, f.Wait(context.Background()))
	want := make([]byte, 64)
	for i := range want {
		want[i] = byte(64 + i)
	}
	if !bytes.Equal(mem[:64], want) {
		t.Errorf("imported memory after the copies: % x, want % x", mem[:16], want[:16])
	}
	if _, err := d.Import(mem[1:]); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Import of unaligned memory: %v, want ErrInvalidArgument", err)
	}
}

// TestValidationOption: OpenOptions.Validation needs MTL_DEBUG_LAYER=1.
func TestValidationOption(t *testing.T) {
	requireMetal(t)
	d, err := Backend{}.Open(0, backend.OpenOptions{Validation: true})
	if os.Getenv("MTL_DEBUG_LAYER") == "1" {
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		return
	}
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Validation without MTL_DEBUG_LAYER=1: %v, want ErrUnsupported", err)
	}
}

// TestSharedPipelines: ranks on one GPU share compiled pipelines (the shim
// caches them per device), and steady-state work creates no objects.
func TestSharedPipelines(t *testing.T) {
	a := openDevice(t, backend.OpenOptions{})
	b := openDevice(t, backend.OpenOptions{})
	for _, d := range []*device{a, b} {
		x := alloc(t, d, 4096, backend.HostVisible)
		r := backend.Region{Buf: x, Len: 4096}
		s := d.Stream()
		for i := 0; i < 3; i++ {
			before := d.Counters().ObjectsCreated.Load()
			must(t, s.Reduce(backend.Sum, backend.F32, r, []backend.Region{r, r}, 0.5))
			f, err := s.Submit()
			must(t, err)
			must(t, f.Wait(context.Background()))
			if after := d.Counters().ObjectsCreated.Load(); i > 0 && after != before {
				t.Errorf("round %d created %d objects", i, after-before)
			}
		}
	}
}
