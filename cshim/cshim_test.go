//go:build cgo && !novulkan

package cshim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

func TestMain(m *testing.M) {
	os.Setenv("GOCOLL_VULKAN_VALIDATION", "1")
	code := m.Run()
	// Where Vulkan cannot start, the loader's messages are expected (the
	// init error quotes them) and the tests skipped.
	if msgs := Vulkan().TakeMessages(); len(msgs) > 0 && Vulkan().Init(InitOptions{}) == nil {
		fmt.Fprintf(os.Stderr, "FAIL: the validation layer reported:\n%s\n", strings.Join(msgs, "\n"))
		code = 1
	}
	os.Exit(code)
}

// open opens Vulkan device 0 or skips (fails in CI, where lavapipe must be
// installed), and checks the validation layer stayed silent.
func open(t testing.TB, opts OpenOptions) *Device {
	t.Helper()
	impl := Vulkan()
	err := impl.Init(InitOptions{})
	var devs []DeviceInfo
	if err == nil {
		devs, err = impl.Devices()
	}
	if err == nil && (len(devs) == 0 || !devs[0].Usable) {
		err = errors.New("no usable Vulkan device")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true needs Vulkan (lavapipe, validation layer): %v", err)
		}
		t.Skipf("no usable Vulkan here: %v", err)
	}
	d, err := impl.Open(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		if msgs := impl.TakeMessages(); len(msgs) > 0 {
			t.Errorf("validation layer:\n%s", strings.Join(msgs, "\n"))
		}
	})
	return d
}

// scaleKernel creates scale_f32 (dst = src * scale, or a copy).
func scaleKernel(t testing.TB, d *Device, scale bool) *Kernel {
	t.Helper()
	info, err := kernels.Lookup(kernels.ScaleF32)
	if err != nil {
		t.Fatal(err)
	}
	spirv, err := kernels.SPIRV(kernels.ScaleF32)
	if err != nil {
		t.Fatal(err)
	}
	// DenormPreserve only where the device takes it.
	spirv, err = kernels.AdaptFloatControls(spirv, d.Info().KernelFloatControls())
	if err != nil {
		t.Fatal(err)
	}
	sc := uint32(0)
	if scale {
		sc = 1
	}
	k, err := d.NewKernel(KernelDesc{SPIRV: spirv, PushBytes: info.PushConstantBytes, Bindings: info.Bindings,
		Spec: []SpecConstant{{ID: kernels.SpecWorkGroupSize, Value: 64}, {ID: kernels.SpecScale, Value: sc}}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// scalePush fills scale_f32's push constants.
func scalePush(p []byte, n, dstOff, srcOff uint32, scale float32) []byte {
	binary.NativeEndian.PutUint32(p[0:], n)
	binary.NativeEndian.PutUint32(p[4:], dstOff)
	binary.NativeEndian.PutUint32(p[8:], srcOff)
	binary.NativeEndian.PutUint32(p[16:], math.Float32bits(scale))
	return p[:20]
}

func newBuffer(t testing.TB, d *Device, size int64, mem backend.Memory) *Buffer {
	t.Helper()
	b, err := d.NewBuffer(size, mem)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.NativeEndian.Uint32(b[4*i:]))
	}
	return v
}

func putFloats(b []byte, v []float32) {
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

func TestTable(t *testing.T) {
	impl := Vulkan()
	if impl.Name() != "vulkan" {
		t.Errorf("Name() = %q", impl.Name())
	}
	if n := impl.missingEntries(); n != 0 {
		t.Errorf("%d table entries are NULL", n)
	}
	if impl.abiVersion() != ABIVersion {
		t.Errorf("table ABI version %d, header %d", impl.abiVersion(), ABIVersion)
	}
}

func TestStatusValues(t *testing.T) {
	for s, c := range cStatuses() {
		if int32(s) != c {
			t.Errorf("Status %v = %d, shim.h says %d", s, int32(s), c)
		}
	}
	for name, v := range cConstants() {
		if v[0] != v[1] {
			t.Errorf("%s = %d, shim.h says %d", name, v[0], v[1])
		}
	}
	for m, c := range cMemoryKinds() {
		if int32(m) != c {
			t.Errorf("backend.Memory %v = %d, shim.h says %d", m, int32(m), c)
		}
	}
}

func TestInstanceAndDevices(t *testing.T) {
	d := open(t, OpenOptions{})
	in, err := Vulkan().Instance()
	if err != nil {
		t.Fatal(err)
	}
	if !in.Validation || in.Library == "" || in.APIVersion < 1<<22|1<<12 {
		t.Errorf("Instance() = %+v", in)
	}
	i := d.Info()
	if i.Name == "" || !i.PushDescriptor || i.MaxStorageBufferRange == 0 || i.MaxMemoryAllocationSize == 0 ||
		i.MinStorageBufferOffsetAlignment == 0 || i.SubgroupSize == 0 || i.MaxComputeWorkGroupCount[0] == 0 ||
		i.MaxComputeWorkGroupInvocations == 0 || i.MaxPushConstantsSize < 128 || i.MaxPushDescriptors < 9 || len(i.Heaps) == 0 {
		t.Errorf("Info() = %+v", i)
	}
	if i.ExternalMemoryHost && i.MinImportedHostPointerAlignment == 0 {
		t.Error("external memory host without an alignment")
	}
	// Mesa's lavapipe has every feature of the narrow and wide kernels.
	if i.Type == DeviceCPU && strings.Contains(i.Name, "llvmpipe") && (!i.ShaderInt64 || !i.StorageBuffer8Bit || !i.StorageBuffer16Bit) {
		t.Errorf("lavapipe reports shaderInt64 %v, storageBuffer8BitAccess %v, storageBuffer16BitAccess %v; want all",
			i.ShaderInt64, i.StorageBuffer8Bit, i.StorageBuffer16Bit)
	}
	t.Logf("instance %v (loader %v), %s, %s %s, type %v, float64 %v, int64 %v, 8-bit storage %v, 16-bit storage %v, timestamps %d bits x %v ns",
		in.APIVersion, in.LoaderVersion, i.Name, i.DriverName, i.DriverInfo, i.Type, i.ShaderFloat64, i.ShaderInt64, i.StorageBuffer8Bit,
		i.StorageBuffer16Bit, i.TimestampValidBits, i.TimestampPeriod)
}

// TestDispatch runs one kernel with push constants, an element offset and
// specialization, and checks the C side's counters.
func TestDispatch(t *testing.T) {
	d := open(t, OpenOptions{})
	k := scaleKernel(t, d, true)
	const n = 1000
	src := newBuffer(t, d, 4*n, backend.HostVisible)
	dst := newBuffer(t, d, 4*n+16, backend.HostVisible)
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i) - 500
	}
	putFloats(src.Bytes(), in)
	var push [MaxPushBytes]byte
	before := d.Counters()
	err := d.CmdDispatch(k, [3]uint32{(n + 63) / 64, 1, 1},
		[]Binding{{Buffer: dst, Offset: 16, Range: 4 * n}, {Buffer: src, Range: 4 * n}}, scalePush(push[:], n, 0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Wait(ticket, -1); !ok || err != nil {
		t.Fatalf("Wait = %v, %v", ok, err)
	}
	got := floats(dst.Bytes()[16:])
	for i := range in {
		if got[i] != 3*in[i] {
			t.Fatalf("element %d = %v, want %v", i, got[i], 3*in[i])
		}
	}
	c := d.Counters()
	if c.Dispatches-before.Dispatches != 1 || c.Submits-before.Submits != 1 {
		t.Errorf("counters %+v -> %+v", before, c)
	}
	// Mismatched bindings or push constants are rejected before C.
	if err := d.CmdDispatch(k, [3]uint32{1, 1, 1}, []Binding{{Buffer: dst, Range: 4}}, push[:20]); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("one binding for two: %v", err)
	}
	// A range past the buffer is rejected by C, naming the Vulkan call.
	err = d.CmdDispatch(k, [3]uint32{1, 1, 1}, []Binding{{Buffer: dst, Range: 8 * n}, {Buffer: src, Range: 4}}, push[:20])
	var e *Error
	if !errors.As(err, &e) || e.Status != InvalidArgument || !strings.Contains(e.Msg, "vkCmdPushDescriptorSetKHR") {
		t.Errorf("range past the buffer: %v", err)
	}
}

// TestTickets checks submission tickets with a ring of 2 slots: reusing a
// slot waits for it, old tickets are done, unknown tickets are rejected.
func TestTickets(t *testing.T) {
	d := open(t, OpenOptions{RingSize: 2})
	a := newBuffer(t, d, 1<<20, backend.DeviceLocal)
	b := newBuffer(t, d, 1<<20, backend.DeviceLocal)
	if tk, err := d.Submit(); tk != 0 || err != nil {
		t.Errorf("empty first Submit = %d, %v; want 0", tk, err)
	}
	if ok, err := d.Wait(0, 0); !ok || err != nil {
		t.Errorf("Wait(0) = %v, %v", ok, err)
	}
	var last uint64
	for i := 1; i <= 5; i++ {
		if err := d.CmdCopy(b, 0, a, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		tk, err := d.Submit()
		if err != nil {
			t.Fatal(err)
		}
		if tk != uint64(i) {
			t.Fatalf("ticket %d, want %d", tk, i)
		}
		last = tk
	}
	if tk, _ := d.Submit(); tk != last {
		t.Errorf("empty Submit = %d, want the last ticket %d", tk, last)
	}
	if _, err := d.Wait(last+1, 0); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Wait(unsubmitted) = %v, want ErrInvalidArgument", err)
	}
	// Ticket 1's slot was reused (ring of 2): it is done.
	if ok, err := d.Wait(1, 0); !ok || err != nil {
		t.Errorf("Wait(1, poll) = %v, %v; want done", ok, err)
	}
	if ok, err := d.Wait(last, time.Second); !ok || err != nil {
		t.Errorf("Wait(last) = %v, %v", ok, err)
	}
	if err := d.WaitIdle(); err != nil {
		t.Fatal(err)
	}
}

// TestTimestamps writes timestamps around a dispatch and reads them back.
func TestTimestamps(t *testing.T) {
	d := open(t, OpenOptions{TimestampQueries: 2})
	if d.Info().TimestampValidBits == 0 {
		t.Skip("no timestamps on the compute queue")
	}
	k := scaleKernel(t, d, false)
	const n = 1 << 20
	src := newBuffer(t, d, 4*n, backend.DeviceLocal)
	dst := newBuffer(t, d, 4*n, backend.DeviceLocal)
	var push [MaxPushBytes]byte
	if err := d.CmdTimestamp(0); err != nil {
		t.Fatal(err)
	}
	if err := d.CmdDispatch(k, [3]uint32{1024, 1, 1}, []Binding{{Buffer: dst, Range: 4 * n}, {Buffer: src, Range: 4 * n}},
		scalePush(push[:], n, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := d.CmdTimestamp(1); err != nil {
		t.Fatal(err)
	}
	if err := d.CmdTimestamp(2); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("CmdTimestamp(2) of 2 = %v", err)
	}
	tk, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(tk, -1); err != nil {
		t.Fatal(err)
	}
	var ts [2]uint64
	ok, err := d.ReadTimestamps(0, ts[:])
	if !ok || err != nil {
		t.Fatalf("ReadTimestamps = %v, %v", ok, err)
	}
	if ts[1] < ts[0] {
		t.Errorf("timestamps go backwards: %v", ts)
	}
	t.Logf("copy of %d MiB by kernel: %.1f us", 4*n>>20, float64(ts[1]-ts[0])*float64(d.Info().TimestampPeriod)/1e3)
}

// TestCopyNow moves data in and out of device-local memory synchronously,
// without touching what is being recorded.
func TestCopyNow(t *testing.T) {
	d := open(t, OpenOptions{})
	host := newBuffer(t, d, 4096, backend.HostVisible)
	dev := newBuffer(t, d, 4096, backend.DeviceLocal)
	for i := range host.Bytes() {
		host.Bytes()[i] = byte(i)
	}
	// Something recorded and not submitted stays so.
	if err := d.CmdCopy(dev, 0, host, 2048, 16); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyNow(dev, 100, host, 0, 2000); err != nil {
		t.Fatal(err)
	}
	clear(host.Bytes())
	if err := d.CopyNow(host, 0, dev, 100, 2000); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if host.Bytes()[i] != byte(i) {
			t.Fatalf("byte %d = %d", i, host.Bytes()[i])
		}
	}
	if err := d.CopyNow(dev, 0, dev, 8, 16); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("overlapping CopyNow = %v", err)
	}
	if tk, err := d.Submit(); tk != 1 || err != nil {
		t.Errorf("Submit after CopyNow = %d, %v; want ticket 1 (the recorded copy)", tk, err)
	}
}

// TestDeferredDestroy: closing a buffer or kernel that submitted work uses
// frees it only once that work is known to be done.
func TestDeferredDestroy(t *testing.T) {
	d := open(t, OpenOptions{})
	k := scaleKernel(t, d, false)
	src := newBuffer(t, d, 4096, backend.HostVisible)
	dst := newBuffer(t, d, 4096, backend.HostVisible)
	var push [MaxPushBytes]byte
	if err := d.CmdDispatch(k, [3]uint32{16, 1, 1}, []Binding{{Buffer: dst, Range: 4096}, {Buffer: src, Range: 4096}},
		scalePush(push[:], 1024, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	tk, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	before := d.Counters().ObjectsDestroyed
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.Counters().ObjectsDestroyed - before; got != 0 {
		t.Errorf("%d objects destroyed while their submission may run", got)
	}
	if _, err := d.Wait(tk, -1); err != nil {
		t.Fatal(err)
	}
	// buffer + memory, pipeline + pipeline layout + set layout
	if got := d.Counters().ObjectsDestroyed - before; got != 5 {
		t.Errorf("%d objects destroyed after the wait, want 5", got)
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := d.CmdCopy(dst, 0, src, 0, 4); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("use of a closed buffer: %v", err)
	}
}

// TestSteadyState: dispatch + submit + wait allocate no Go memory and
// create no Vulkan object.
func TestSteadyState(t *testing.T) {
	d := open(t, OpenOptions{})
	k := scaleKernel(t, d, true)
	src := newBuffer(t, d, 4096, backend.HostVisible)
	dst := newBuffer(t, d, 4096, backend.DeviceLocal)
	var push [MaxPushBytes]byte
	bind := []Binding{{Buffer: dst, Range: 4096}, {Buffer: src, Range: 4096}}
	var runErr error
	run := func() {
		p := scalePush(push[:], 1024, 0, 0, 2)
		if err := d.CmdDispatch(k, [3]uint32{16, 1, 1}, bind, p); err != nil {
			runErr = err
		}
		if err := d.CmdCopy(src, 0, dst, 0, 64); err != nil {
			runErr = err
		}
		tk, err := d.Submit()
		if err == nil {
			_, err = d.Wait(tk, 0)
			if err == nil {
				_, err = d.Wait(tk, -1)
			}
		}
		if err != nil {
			runErr = err
		}
	}
	run()
	before := d.Counters()
	if a := testing.AllocsPerRun(100, run); a != 0 && !asanEnabled {
		t.Errorf("%v allocations per dispatch+copy+submit+wait, want 0", a)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	if got := d.Counters().ObjectsCreated - before.ObjectsCreated; got != 0 {
		t.Errorf("%d Vulkan objects created in steady state", got)
	}
}

// TestErrors: failures carry the status, the VkResult and a message naming
// the Vulkan call.
func TestErrors(t *testing.T) {
	d := open(t, OpenOptions{})
	_, err := d.NewBuffer(int64(d.Info().MaxMemoryAllocationSize)+4096, backend.DeviceLocal)
	var e *Error
	if !errors.As(err, &e) || e.Status != Unsupported || !strings.HasPrefix(e.Msg, "vkAllocateMemory: ") || !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("huge buffer: %#v", err)
	}
	if e != nil && e.Op != "vulkan.buffer_create" {
		t.Errorf("Op = %q", e.Op)
	}
	a := newBuffer(t, d, 64, backend.DeviceLocal)
	if err := d.CmdCopy(a, 0, a, 16, 32); !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "vkCmdCopyBuffer") {
		t.Errorf("overlapping copy: %v", err)
	}
	if _, err := Vulkan().Open(1<<20, OpenOptions{}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Open(no such device): %v", err)
	}
	if _, err := d.NewKernel(KernelDesc{SPIRV: []byte{1, 2, 3}, Bindings: 1}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("3 bytes of SPIR-V: %v", err)
	}
}

// TestClose: Close is idempotent and frees what was left open; later calls
// fail with ErrClosed.
func TestClose(t *testing.T) {
	d := open(t, OpenOptions{})
	left := newBuffer(t, d, 64, backend.HostVisible)
	k := scaleKernel(t, d, false)
	if err := d.CmdCopy(left, 0, left, 32, 16); err != nil {
		t.Fatal(err)
	}
	created := d.Counters().ObjectsCreated
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := left.Close(); err != nil || k.Close() != nil {
		t.Errorf("Close of a buffer or kernel after the device: %v", err)
	}
	if _, err := d.NewBuffer(4, backend.HostVisible); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("NewBuffer after Close: %v", err)
	}
	if _, err := d.Submit(); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if created == 0 {
		t.Error("no objects counted")
	}
}
