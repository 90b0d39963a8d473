//go:build cgo && !novulkan

package vulkan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/kernels"
)

// TestCopy copies between device-local and host-visible memory at odd
// offsets, and rejects overlapping and mismatched regions.
func TestCopy(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n = 10007
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	a := alloc(t, d, n+5, backend.HostVisible)
	b := alloc(t, d, n+9, backend.DeviceLocal)
	c := alloc(t, d, n+3, backend.HostVisible)
	if err := a.Write(5, src); err != nil {
		t.Fatal(err)
	}
	s := d.Stream()
	before := d.Counters().Snapshot()
	if err := s.Copy(backend.Region{Buf: b, Off: 9, Len: n}, backend.Region{Buf: a, Off: 5, Len: n}); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(backend.Region{Buf: c, Off: 3, Len: n}, backend.Region{Buf: b, Off: 9, Len: n}); err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	if !bytes.Equal(c.Bytes()[3:], src) {
		t.Error("copied bytes differ")
	}
	if got := d.Counters().Snapshot().Sub(before); got.Copies != 2 || got.BytesCopied != 2*n || got.Submits != 1 {
		t.Errorf("counters %+v: want 2 copies of %d bytes in 1 submit", got, n)
	}
	for _, c := range []struct{ dst, src backend.Region }{
		{backend.Region{Buf: a, Off: 0, Len: 100}, backend.Region{Buf: a, Off: 50, Len: 100}},
		{backend.Region{Buf: a, Off: 0, Len: 100}, backend.Region{Buf: b, Off: 0, Len: 99}},
		{backend.Region{Buf: a, Off: n, Len: 100}, backend.Region{Buf: b, Off: 0, Len: 100}},
	} {
		if err := s.Copy(c.dst, c.src); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Copy(%+v, %+v) = %v, want ErrInvalidArgument", c.dst, c.src, err)
		}
	}
}

// TestStagedReadWrite moves more than one staging buffer's worth through
// DeviceLocal Write and Read, at odd offsets.
func TestStagedReadWrite(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	n := shimdev.StagingBytes + 4099
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*131 + i>>13)
	}
	b := alloc(t, d, n+7, backend.DeviceLocal)
	if b.Bytes() != nil {
		t.Error("DeviceLocal buffer has a mapping")
	}
	before := d.Counters().Snapshot()
	if err := b.Write(7, p); err != nil {
		t.Fatal(err)
	}
	q := make([]byte, n)
	if err := b.Read(7, q); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, q) {
		t.Error("read back differs")
	}
	got := d.Counters().Snapshot().Sub(before)
	if got.BytesWritten != int64(n) || got.BytesRead != int64(n) {
		t.Errorf("BytesWritten %d, BytesRead %d, want %d", got.BytesWritten, got.BytesRead, n)
	}
	if err := b.Write(8, p); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Write past the end = %v, want ErrInvalidArgument", err)
	}
	if err := b.Read(-1, q[:1]); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Read at -1 = %v, want ErrInvalidArgument", err)
	}
	zero := alloc(t, d, 0, backend.DeviceLocal)
	if zero.Len() != 0 || zero.Write(0, nil) != nil || zero.Read(0, nil) != nil {
		t.Error("empty buffer misbehaves")
	}
}

// TestPipelinedSubmits submits a chain of dependent reductions, one Submit
// each, without waiting in between, then waits for the fences in reverse.
func TestPipelinedSubmits(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n, steps = 100003, 40 // more steps than the ring has slots
	one := alloc(t, d, n*4, backend.DeviceLocal)
	acc := alloc(t, d, n*4, backend.HostVisible)
	vals := sources(1, n, func(i, j int) float32 { return float32(j % 13) })[0]
	put(t, one, 0, vals)
	s := d.Stream()
	r1, ra := backend.Region{Buf: one, Len: n * 4}, backend.Region{Buf: acc, Len: n * 4}
	if err := s.Scale(backend.F32, ra, r1, 1); err != nil {
		t.Fatal(err)
	}
	fences := make([]backend.Fence, 0, steps)
	for i := 1; i < steps; i++ {
		if err := s.Reduce(backend.Sum, backend.F32, ra, []backend.Region{ra, r1}, 1); err != nil {
			t.Fatal(err)
		}
		f, err := s.Submit()
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, f)
	}
	for i := len(fences) - 1; i >= 0; i-- {
		if err := fences[i].Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]float32, n)
	for i := range want {
		want[i] = steps * vals[i]
	}
	compare(t, "chain", get[float32](t, acc, 0, n), want)
	// An empty submission is already signalled, and waiting twice is fine.
	f, err := s.Submit()
	if err != nil || f.Wait(context.Background()) != nil || fences[0].Wait(context.Background()) != nil {
		t.Errorf("empty Submit / second Wait: %v", err)
	}
}

// TestFenceContext: Wait returns the context's error when it ends first.
func TestFenceContext(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n, k = 1<<20 + 3, 8
	regs := make([]backend.Region, k)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, n*4, backend.DeviceLocal), Len: n * 4}
	}
	out := backend.Region{Buf: alloc(t, d, n*4, backend.DeviceLocal), Len: n * 4}
	s := d.Stream()
	for i := 0; i < 4; i++ {
		if err := s.Reduce(backend.Prod, backend.F32, out, regs, 1); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.Submit()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait(cancelled) = %v, want context.Canceled", err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A deadline that passes while waiting.
	for i := 0; i < 8; i++ {
		if err := s.Reduce(backend.Prod, backend.F32, out, regs, 1); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = s.Submit(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Microsecond)
	defer cancel()
	err = f.Wait(ctx)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait(deadline) = %v, want nil or context.DeadlineExceeded", err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSteadyState: once pipelines exist, Reduce + Submit + Wait allocate no
// Go memory and create no Vulkan object, in one pass, several passes and
// split dispatches alike.
func TestSteadyState(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: 64 << 10})
	const n = 50000
	regs := make([]backend.Region, 10)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, n*4+4, backend.HostVisible), Off: 4, Len: n * 4}
	}
	dst := backend.Region{Buf: alloc(t, d, n*4, backend.DeviceLocal), Len: n * 4}
	s := d.Stream()
	ctx := context.Background()
	var runErr error
	run := func() {
		for _, k := range []int{3, 10} {
			if err := s.Reduce(backend.Sum, backend.F32, dst, regs[:k], 0.5); err != nil {
				runErr = err
				return
			}
		}
		if err := s.Scale(backend.F32, regs[0], dst, 1); err != nil {
			runErr = err
			return
		}
		f, err := s.Submit()
		if err == nil {
			err = f.Wait(ctx)
		}
		if err != nil {
			runErr = err
		}
	}
	run() // creates the pipelines
	before := d.Counters().Snapshot()
	allocs := testing.AllocsPerRun(50, run)
	if runErr != nil {
		t.Fatal(runErr)
	}
	after := d.Counters().Snapshot().Sub(before)
	if allocs != 0 && !asanEnabled {
		t.Errorf("%v Go allocations per Reduce+Submit+Wait, want 0", allocs)
	}
	if after.ObjectsCreated != 0 {
		t.Errorf("%d Vulkan objects created in steady state, want 0", after.ObjectsCreated)
	}
	if after.Dispatches < 51*4 || after.Submits != 51 {
		t.Errorf("counters %+v: expected split dispatches and 51 submits", after)
	}
	t.Logf("per iteration: %d dispatches, 0 allocations, 0 objects", after.Dispatches/51)
}

// TestDisableFloat64: f64 kernels are unsupported on a device opened
// without f64, and f32 still works.
func TestDisableFloat64(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{DisableFloat64: true})
	in := d.Info()
	if in.Float64 || !strings.Contains(in.Float64Reason, "DisableFloat64") && !strings.Contains(in.Float64Reason, "shaderFloat64") {
		t.Errorf("Float64 %v, reason %q", in.Float64, in.Float64Reason)
	}
	b := alloc(t, d, 64, backend.HostVisible)
	r := backend.Region{Buf: b, Len: 32}
	if err := d.Stream().Reduce(backend.Sum, backend.F64, r, []backend.Region{r}, 1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("f64 Reduce = %v, want ErrUnsupported", err)
	}
	if err := d.Stream().Scale(backend.F64, r, r, 2); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("f64 Scale = %v, want ErrUnsupported", err)
	}
	put(t, b, 0, []float32{1, 2, 3})
	r = backend.Region{Buf: b, Len: 12}
	if err := d.Stream().Reduce(backend.Sum, backend.F32, r, []backend.Region{r, r}, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, d.Stream())
	compare(t, "f32", get[float32](t, b, 0, 3), []float32{2, 4, 6})
}

// TestInvalidArguments: bad calls fail with ErrInvalidArgument and record
// nothing.
func TestInvalidArguments(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	other := openDevice(t, backend.OpenOptions{})
	a := alloc(t, d, 1024, backend.HostVisible)
	foreign := alloc(t, other, 1024, backend.HostVisible)
	r := func(b backend.Buffer, off, n int) backend.Region { return backend.Region{Buf: b, Off: off, Len: n} }
	s := d.Stream()
	cases := []struct {
		name string
		err  error
	}{
		{"length mismatch", s.Reduce(backend.Sum, backend.F32, r(a, 0, 16), []backend.Region{r(a, 64, 12)}, 1)},
		{"foreign buffer", s.Reduce(backend.Sum, backend.F32, r(a, 0, 16), []backend.Region{r(foreign, 0, 16)}, 1)},
		{"partial overlap", s.Reduce(backend.Sum, backend.F32, r(a, 0, 16), []backend.Region{r(a, 4, 16)}, 1)},
		{"odd offset", s.Reduce(backend.Sum, backend.F32, r(a, 2, 16), []backend.Region{r(a, 64, 16)}, 1)},
		{"odd length", s.Reduce(backend.Sum, backend.F64, r(a, 0, 12), []backend.Region{r(a, 64, 12)}, 1)},
		{"outside buffer", s.Reduce(backend.Sum, backend.F32, r(a, 1020, 16), []backend.Region{r(a, 0, 16)}, 1)},
		{"no sources", s.Reduce(backend.Sum, backend.F32, r(a, 0, 16), nil, 1)},
		{"unknown op", s.Reduce(backend.Op(7), backend.F32, r(a, 0, 16), []backend.Region{r(a, 64, 16)}, 1)},
		{"unknown dtype", s.Reduce(backend.Sum, backend.DType(99), r(a, 0, 16), []backend.Region{r(a, 64, 16)}, 1)},
		{"nil buffer", s.Scale(backend.F32, r(nil, 0, 16), r(a, 0, 16), 1)},
		{"scale overlap", s.Scale(backend.F32, r(a, 0, 16), r(a, 8, 16), 1)},
		{"negative alloc", func() error { _, err := d.Alloc(-1, backend.HostVisible); return err }()},
		{"bad device index", func() error { _, err := (Backend{}).Open(1<<20, backend.OpenOptions{}); return err }()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, c.err)
		}
	}
	if s.(*stream).Recorded() {
		t.Error("a failed call recorded work")
	}
}

// TestClose: Close is idempotent, frees what the caller did not, and later
// calls fail with ErrClosed.
func TestClose(t *testing.T) {
	requireVulkan(t)
	t.Cleanup(func() { checkValidation(t) })
	dev, err := Backend{}.Open(0, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := alloc(t, dev, 64, backend.HostVisible)
	kept := alloc(t, dev, 64, backend.DeviceLocal) // never closed by the caller
	r := backend.Region{Buf: b, Len: 16}
	if err := dev.Stream().Reduce(backend.Sum, backend.F32, r, []backend.Region{r}, 1); err != nil {
		t.Fatal(err)
	}
	f, err := dev.Stream().Submit()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // deferred until the submission is done
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Buffer.Close = %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Errorf("Wait after Close = %v, want nil (Close waited)", err)
	}
	if err := kept.Close(); err != nil {
		t.Errorf("Buffer.Close after device Close = %v", err)
	}
	if _, err := dev.Alloc(4, backend.HostVisible); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want ErrClosed", err)
	}
	if err := dev.Stream().Reduce(backend.Sum, backend.F32, r, []backend.Region{r}, 1); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Reduce after Close = %v, want ErrClosed", err)
	}
	if err := kept.Write(0, []byte{1}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if _, err := dev.Stream().Submit(); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

// TestConcurrentDevices opens 4 devices on one physical device from 4
// goroutines at once; each reduces its own data on its own queue.
func TestConcurrentDevices(t *testing.T) {
	requireVulkan(t)
	t.Cleanup(func() { checkValidation(t) })
	const ranks, n, rounds = 4, 65537, 10
	var wg sync.WaitGroup
	errs := make(chan error, ranks)
	for rank := 0; rank < ranks; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rankWork(rank, n, rounds); err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func rankWork(rank, n, rounds int) (err error) {
	dev, err := Backend{}.Open(0, backend.OpenOptions{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := dev.Close(); err == nil {
			err = cerr
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(rank), 11))
	const k = 4
	srcs := sources(k, n, func(i, j int) float32 { return float32(rng.IntN(100)) })
	regs := make([]backend.Region, k)
	for i := range regs {
		b, err := dev.Alloc(n*4, backend.DeviceLocal)
		if err != nil {
			return err
		}
		if err := b.Write(0, asBytes(srcs[i])); err != nil {
			return err
		}
		regs[i] = backend.Region{Buf: b, Len: n * 4}
	}
	out, err := dev.Alloc(n*4, backend.HostVisible)
	if err != nil {
		return err
	}
	dst := backend.Region{Buf: out, Len: n * 4}
	s := dev.Stream()
	for r := 0; r < rounds; r++ {
		op := ops[(rank+r)%len(ops)]
		if err := s.Reduce(op, backend.F32, dst, regs, 1); err != nil {
			return err
		}
		f, err := s.Submit()
		if err != nil {
			return err
		}
		if err := f.Wait(context.Background()); err != nil {
			return err
		}
		want := reduceRef(op, srcs, 1)
		got := make([]float32, n)
		if err := out.Read(0, asBytes(got)); err != nil {
			return err
		}
		for i := range want {
			if !sameBits(got[i], want[i]) {
				return fmt.Errorf("round %d %v: element %d = %v, want %v", r, op, i, got[i], want[i])
			}
		}
	}
	return nil
}

// TestValidationCatches makes one deliberate violation through cshim (a
// binding range larger than the device's real maxStorageBufferRange, which
// lavapipe itself does not enforce) and checks that the layer's message is
// recorded, then drains it.
func TestValidationCatches(t *testing.T) {
	requireVulkan(t)
	if validationOff() {
		t.Skip("GOCOLL_VULKAN_VALIDATION=0")
	}
	checkValidation(t)
	impl := cshim.Vulkan()
	dev, err := impl.Open(0, cshim.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	info, _ := kernels.Lookup(kernels.ScaleF32)
	spirv, _ := kernels.SPIRV(kernels.ScaleF32)
	spirv, err = kernels.AdaptFloatControls(spirv, dev.Info().KernelFloatControls())
	if err != nil {
		t.Fatal(err)
	}
	k, err := dev.NewKernel(cshim.KernelDesc{SPIRV: spirv, PushBytes: info.PushConstantBytes, Bindings: info.Bindings,
		Spec: []cshim.SpecConstant{{ID: kernels.SpecWorkGroupSize, Value: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(dev.Info().MaxStorageBufferRange)
	big, err := dev.NewBuffer(limit+256, backend.DeviceLocal)
	if err != nil {
		t.Skipf("cannot allocate %d bytes: %v", limit+256, err)
	}
	small, err := dev.NewBuffer(256, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	push := make([]byte, info.PushConstantBytes)
	push[0] = 16 // n
	before := impl.MessageCount()
	err = dev.CmdDispatch(k, [3]uint32{1, 1, 1},
		[]cshim.Binding{{Buffer: big, Range: limit + 16}, {Buffer: small, Range: 64}}, push)
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := dev.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Wait(ticket, -1); err != nil {
		t.Fatal(err)
	}
	if impl.MessageCount() == before {
		t.Fatal("the validation layer reported nothing for a binding past maxStorageBufferRange")
	}
	msgs := ValidationMessages()
	found := false
	for _, m := range msgs {
		found = found || strings.Contains(m, "VUID-VkWriteDescriptorSet-descriptorType-00333")
	}
	if !found {
		t.Errorf("no VUID-VkWriteDescriptorSet-descriptorType-00333 among %d messages:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
	if rest := ValidationMessages(); len(rest) != 0 {
		t.Errorf("ValidationMessages did not drain: %d left", len(rest))
	}
}

// TestValidationOption: OpenOptions.Validation works when the instance has
// the layer (TestMain set GOCOLL_VULKAN_VALIDATION=1 first).
func TestValidationOption(t *testing.T) {
	if validationOff() {
		t.Skip("GOCOLL_VULKAN_VALIDATION=0")
	}
	d := openDevice(t, backend.OpenOptions{Validation: true})
	if !d.Validation() {
		t.Error("device does not check validation messages")
	}
}

// TestUnavailableLibrary loads libvulkan from a path that does not exist,
// in a child process (Vulkan is loaded once per process): Available must
// return an error wrapping ErrUnavailable that names the path.
func TestUnavailableLibrary(t *testing.T) {
	if os.Getenv(subprocessEnv) == "unavailable" {
		err := Backend{}.Available()
		fmt.Printf("available: %v\nwraps ErrUnavailable: %v\n", err, errors.Is(err, backend.ErrUnavailable))
		_, derr := Backend{}.Devices()
		_, oerr := Backend{}.Open(0, backend.OpenOptions{})
		fmt.Printf("devices/open wrap ErrUnavailable: %v %v\n",
			errors.Is(derr, backend.ErrUnavailable), errors.Is(oerr, backend.ErrUnavailable))
		return
	}
	const path = "/nonexistent/libvulkan.so.1"
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailableLibrary$", "-test.v")
	cmd.Env = append(os.Environ(), subprocessEnv+"=unavailable", "GOCOLL_VULKAN_LIB="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "wraps ErrUnavailable: true") || !strings.Contains(s, "devices/open wrap ErrUnavailable: true true") {
		t.Errorf("child did not report ErrUnavailable:\n%s", s)
	}
	if !strings.Contains(s, "available: ") || !strings.Contains(s, path) {
		t.Errorf("the error does not name %s:\n%s", path, s)
	}
	t.Logf("child: %s", strings.SplitN(s, "\n", 3)[1])
}
