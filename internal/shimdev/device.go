//go:build cgo

package shimdev

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// Kernel kinds, indexing Device.pipes and Device.kinfo.
const (
	kindReduceF32 = iota
	kindReduceF64
	kindScaleF32
	kindScaleF64
	// 16-byte variants (vec.go), same order as the scalar ones.
	kindReduce4F32
	kindReduce4F64
	kindScale4F32
	kindScale4F64
	// 32-bit integer reduce kernels, scalar and 16-byte (ivec4, uvec4).
	// Integers have no scale kind: Scale copies them (scale 1), or divides
	// them by N (a mean's 1/N), with the reduce kernel of one source.
	kindReduceI32
	kindReduceU32
	kindReduce4I32
	kindReduce4U32
	// 64-bit integers, scalar and 16-byte (i64vec2, u64vec2), and 8- and
	// 16-bit integers (scalar only), as the 32-bit ones.
	kindReduceI64
	kindReduceU64
	kindReduce4I64
	kindReduce4U64
	kindReduceI8
	kindReduceU8
	kindReduceI16
	kindReduceU16
	// The 16-bit floats, each followed by its forms that read src0 (+in32),
	// write dst (+out32), or both, as float32 partial results (more than 8
	// sources). Scale by 1 is their reduce kernel with K = 0 (a copy of
	// the bits); by another scale, with one source.
	kindReduceF16
	kindReduceF16In32
	kindReduceF16Out32
	kindReduceF16In32Out32
	kindReduceBF16
	kindReduceBF16In32
	kindReduceBF16Out32
	kindReduceBF16In32Out32
	// The 8-bit floats (OCP E4M3 FN, E5M2), as the 16-bit ones.
	kindReduceE4M3
	kindReduceE4M3In32
	kindReduceE4M3Out32
	kindReduceE4M3In32Out32
	kindReduceE5M2
	kindReduceE5M2In32
	kindReduceE5M2Out32
	kindReduceE5M2In32Out32
	numKinds

	in32  = 1 // kind + in32: src0 holds float32 partial results
	out32 = 2 // kind + out32: dst does
)

// kindSpec says what a kernel kind is.
type kindSpec struct {
	name string
	// ftz is the kernel of a float32 kind on a device that may flush float32
	// subnormals (no DenormPreserveFloat32, and the self-test found its
	// arithmetic flushing or could not run): the same interface, exact on
	// the bits (kernels/float32.glsl).
	ftz string
	dt  backend.DType
	// scale is the size of the float scale push constant: 4 (float), 8
	// (double), or 0 for the integers (which take only div, a mean's N)
	// and the 16-bit kinds that write partial results (never scaled).
	scale   int
	isScale bool // a scale kernel (no op, one source)
	vec     int  // the 16-byte kind of a scalar kind; -1 for none
	// in32 and out32: src0 (in32) or dst (out32) holds float32 partial
	// results, 4 bytes an element, the other bindings 16- or 8-bit elements.
	in32, out32 bool
}

var kinds = [numKinds]kindSpec{
	kindReduceF32:           {name: kernels.ReduceF32, ftz: kernels.ReduceF32FTZ, dt: backend.F32, scale: 4, vec: kindReduce4F32},
	kindReduceF64:           {name: kernels.ReduceF64, dt: backend.F64, scale: 8, vec: kindReduce4F64},
	kindScaleF32:            {name: kernels.ScaleF32, ftz: kernels.ScaleF32FTZ, dt: backend.F32, scale: 4, isScale: true, vec: kindScale4F32},
	kindScaleF64:            {name: kernels.ScaleF64, dt: backend.F64, scale: 8, isScale: true, vec: kindScale4F64},
	kindReduce4F32:          {name: kernels.Reduce4F32, ftz: kernels.Reduce4F32FTZ, dt: backend.F32, scale: 4, vec: -1},
	kindReduce4F64:          {name: kernels.Reduce4F64, dt: backend.F64, scale: 8, vec: -1},
	kindScale4F32:           {name: kernels.Scale4F32, ftz: kernels.Scale4F32FTZ, dt: backend.F32, scale: 4, isScale: true, vec: -1},
	kindScale4F64:           {name: kernels.Scale4F64, dt: backend.F64, scale: 8, isScale: true, vec: -1},
	kindReduceI32:           {name: kernels.ReduceI32, dt: backend.I32, vec: kindReduce4I32},
	kindReduceU32:           {name: kernels.ReduceU32, dt: backend.U32, vec: kindReduce4U32},
	kindReduce4I32:          {name: kernels.Reduce4I32, dt: backend.I32, vec: -1},
	kindReduce4U32:          {name: kernels.Reduce4U32, dt: backend.U32, vec: -1},
	kindReduceI64:           {name: kernels.ReduceI64, dt: backend.I64, vec: kindReduce4I64},
	kindReduceU64:           {name: kernels.ReduceU64, dt: backend.U64, vec: kindReduce4U64},
	kindReduce4I64:          {name: kernels.Reduce4I64, dt: backend.I64, vec: -1},
	kindReduce4U64:          {name: kernels.Reduce4U64, dt: backend.U64, vec: -1},
	kindReduceI8:            {name: kernels.ReduceI8, dt: backend.I8, vec: -1},
	kindReduceU8:            {name: kernels.ReduceU8, dt: backend.U8, vec: -1},
	kindReduceI16:           {name: kernels.ReduceI16, dt: backend.I16, vec: -1},
	kindReduceU16:           {name: kernels.ReduceU16, dt: backend.U16, vec: -1},
	kindReduceF16:           {name: kernels.ReduceF16, dt: backend.Half, scale: 4, vec: -1},
	kindReduceF16In32:       {name: kernels.ReduceF16In32, dt: backend.Half, scale: 4, vec: -1, in32: true},
	kindReduceF16Out32:      {name: kernels.ReduceF16Out32, dt: backend.Half, vec: -1, out32: true},
	kindReduceF16In32Out32:  {name: kernels.ReduceF16In32Out32, dt: backend.Half, vec: -1, in32: true, out32: true},
	kindReduceBF16:          {name: kernels.ReduceBF16, dt: backend.BFloat16, scale: 4, vec: -1},
	kindReduceBF16In32:      {name: kernels.ReduceBF16In32, dt: backend.BFloat16, scale: 4, vec: -1, in32: true},
	kindReduceBF16Out32:     {name: kernels.ReduceBF16Out32, dt: backend.BFloat16, vec: -1, out32: true},
	kindReduceBF16In32Out32: {name: kernels.ReduceBF16In32Out32, dt: backend.BFloat16, vec: -1, in32: true, out32: true},
	kindReduceE4M3:          {name: kernels.ReduceE4M3, dt: backend.F8E4M3, scale: 4, vec: -1},
	kindReduceE4M3In32:      {name: kernels.ReduceE4M3In32, dt: backend.F8E4M3, scale: 4, vec: -1, in32: true},
	kindReduceE4M3Out32:     {name: kernels.ReduceE4M3Out32, dt: backend.F8E4M3, vec: -1, out32: true},
	kindReduceE4M3In32Out32: {name: kernels.ReduceE4M3In32Out32, dt: backend.F8E4M3, vec: -1, in32: true, out32: true},
	kindReduceE5M2:          {name: kernels.ReduceE5M2, dt: backend.F8E5M2, scale: 4, vec: -1},
	kindReduceE5M2In32:      {name: kernels.ReduceE5M2In32, dt: backend.F8E5M2, scale: 4, vec: -1, in32: true},
	kindReduceE5M2Out32:     {name: kernels.ReduceE5M2Out32, dt: backend.F8E5M2, vec: -1, out32: true},
	kindReduceE5M2In32Out32: {name: kernels.ReduceE5M2In32Out32, dt: backend.F8E5M2, vec: -1, in32: true, out32: true},
}

// isScaleKind reports whether kind is a scale kernel (no op, one source).
func isScaleKind(kind int) bool { return kinds[kind].isScale }

// isNarrowKind reports whether kind is a reduce kernel of a narrow float
// type (16- or 8-bit, reduced in float32: backend.DType.IsNarrowFloat).
func isNarrowKind(kind int) bool { return kinds[kind].dt.IsNarrowFloat() }

// sizes returns the bytes of an element of dst and of src0 in a pass of
// kind over elements of es bytes: es, or 4 where the binding holds float32
// partial results.
func sizes(kind, es int) (dst, src0 int) {
	dst, src0 = es, es
	if kinds[kind].out32 {
		dst = 4
	}
	if kinds[kind].in32 {
		src0 = 4
	}
	return dst, src0
}

const (
	// fenceRing is the number of Fence objects a device hands out in turn,
	// so Submit allocates nothing. A Fence stays exact for fenceRing later
	// submissions; after that it stands for a later submission, so Wait may
	// wait longer but never returns before its own work is done.
	fenceRing = 1024
	// StagingBytes is the size of the pooled host-visible buffer that
	// DeviceLocal Write and Read go through.
	StagingBytes = 4 << 20
	// workGroupSize is the kernels' work-group size where the device allows.
	workGroupSize = 256
)

// Device is one rank's logical device (Vulkan: a VkDevice or a queue of a
// shared one; Metal: an MTLCommandQueue) over the ABI.
type Device struct {
	in   *Instance
	name string // API.Name, the prefix of errors
	dev  *cshim.Device
	raw  cshim.DeviceInfo
	info backend.DeviceInfo

	counters backend.Counters
	stream   Stream
	fences   [fenceRing]Fence
	done     atomic.Uint64 // every ticket <= done is known complete

	// ftz means the float32 kinds run their ftz kernels (the device may
	// flush float32 subnormals: Info().Float32Hardware is false; or a test
	// said so, Float32Kernels).
	ftz bool

	// Dispatch geometry, fixed at Open.
	align     int64  // minStorageBufferOffsetAlignment
	maxBind   int64  // MaxBindingBytes
	wg        uint32 // work-group size
	maxGroups uint32 // maxComputeWorkGroupCount[0]
	kinfo     [numKinds]kernels.Info

	// validation makes calls fail when the validation layer reported
	// something since the last check (msgSeen).
	validation bool
	msgSeen    atomic.Uint64

	// pipes caches pipelines by kind, op, source count and scale flag, and
	// code the API's code of each kernel (MSL is prepared once per device).
	// Only the stream's goroutine touches them.
	pipes [numKinds][backend.NumOps][kernels.MaxSources + 1][2]*cshim.Kernel
	code  map[string]kernelCode
	// scratch holds partial results of multi-pass reductions whose
	// destination is also a later source, and the float32 partial results
	// of every multi-pass reduction of a 16-bit type. It grows to the
	// largest reduction and is reused. Only the stream touches it.
	scratch *Buffer
	// vec chooses and counts the 16-byte kernels (vec.go). Only the stream
	// touches it.
	vec vecState
	// multi holds the multi-destination kernels (multi.go). Only the stream
	// touches it.
	multi multiState

	closed    atomic.Bool
	closeDone chan struct{} // closed when Close returns
	lost      error         // why Close could not drain (written before closeDone)
	mu        sync.Mutex    // guards buffers
	buffers   map[*Buffer]struct{}

	stagingMu sync.Mutex // guards staging and serializes staged transfers
	staging   *cshim.Buffer
}

// kernelCode is a kernel's code as the API takes it.
type kernelCode struct {
	code  []byte
	entry string
}

var (
	_ backend.Device   = (*Device)(nil)
	_ backend.Buffer   = (*Buffer)(nil)
	_ backend.Importer = (*Device)(nil)
)

// Open opens physical device index (after a successful Setup) with opts,
// and copts for the shim (the API-specific options). Its float32 kinds run
// the hardware kernels where the device reports DenormPreserveFloat32 or
// the self-test found them exact (float32Kernels: the first open of the
// physical device in the process runs it), else the ftz kernels.
func (in *Instance) Open(index int, opts backend.OpenOptions, copts cshim.OpenOptions) (*Device, error) {
	d, err := in.open(index, opts, copts)
	if err != nil {
		return nil, err
	}
	hardware, reason := in.float32Kernels(index, d.info)
	if err := d.setFloat32(hardware, reason); err != nil {
		d.Close()
		return nil, err
	}
	d.syncObjects()
	if d.validation {
		d.msgSeen.Store(in.impl.MessageCount())
	}
	return d, nil
}

// open opens a Device of physical device index, its kernels not yet
// chosen (setFloat32), for Open and the self-test.
func (in *Instance) open(index int, opts backend.OpenOptions, copts cshim.OpenOptions) (*Device, error) {
	if err := in.CheckIndex(index); err != nil {
		return nil, err
	}
	raw := in.devs[index]
	copts.DrainLimit = opts.DrainLimit
	cd, err := in.impl.Open(index, copts)
	if err != nil {
		return nil, fmt.Errorf("%s: open device %d (%s): %w", in.api.Name, index, raw.Name, err)
	}
	d := &Device{
		in:         in,
		name:       in.api.Name,
		dev:        cd,
		raw:        raw,
		info:       in.api.Info(raw, opts),
		align:      int64(max(raw.MinStorageBufferOffsetAlignment, 1)),
		wg:         min(workGroupSize, raw.MaxComputeWorkGroupInvocations, raw.MaxComputeWorkGroupSize[0]),
		maxGroups:  raw.MaxComputeWorkGroupCount[0],
		validation: in.api.ValidationLog && in.info.Validation,
		buffers:    map[*Buffer]struct{}{},
		closeDone:  make(chan struct{}),
	}
	if opts.MaxWorkGroups > 0 {
		d.maxGroups = min(d.maxGroups, opts.MaxWorkGroups)
	}
	d.info.Float64 = d.info.Float64 && cd.Float64()
	d.info.Kernels = kernelTypes(raw, d.info.Float64)
	d.maxBind = d.info.MaxBindingBytes
	d.stream.d = d
	for i := range d.fences {
		d.fences[i].d = d
	}
	return d, nil
}

// setFloat32 makes the float32 kinds run the hardware kernels or the ftz
// ones, and Info report the choice and why.
func (d *Device) setFloat32(hardware bool, reason string) error {
	d.info.Float32Hardware, d.info.Float32Reason = hardware, reason
	return d.lookKernels(!hardware)
}

// lookKernels fills kinfo with each kind's kernel: with ftz, the ftz
// kernels of the float32 kinds (and, when the multi-destination kernels are
// looked up, theirs).
func (d *Device) lookKernels(ftz bool) error {
	d.ftz = ftz
	for k := range kinds {
		name := kinds[k].name
		if ftz && kinds[k].ftz != "" {
			name = kinds[k].ftz
		}
		var err error
		if d.kinfo[k], err = kernels.Lookup(name); err != nil {
			return d.errorf("%w", err)
		}
	}
	return nil
}

// kernelTypes is DeviceInfo.Kernels: the element types the reduce and scale
// kernels take: f32, int32 and uint32 (core in Vulkan and Metal), f64 where
// the device reduces f64, and the types whose kernels need a feature the
// device reports (and the shim enables at open): int64 and uint64
// (shaderInt64), int8, uint8 and the fp8 types (storageBuffer8BitAccess),
// half, bfloat16, int16 and uint16 (storageBuffer16BitAccess). Metal reports none of the
// three.
func kernelTypes(raw cshim.DeviceInfo, float64 bool) backend.DTypeSet {
	set := backend.F32.Bit() | backend.I32.Bit() | backend.U32.Bit()
	if float64 {
		set |= backend.F64.Bit()
	}
	if raw.ShaderInt64 {
		set |= backend.I64.Bit() | backend.U64.Bit()
	}
	if raw.StorageBuffer8Bit {
		set |= backend.I8.Bit() | backend.U8.Bit() | backend.F8E4M3.Bit() | backend.F8E5M2.Bit()
	}
	if raw.StorageBuffer16Bit {
		set |= backend.Half.Bit() | backend.BFloat16.Bit() | backend.I16.Bit() | backend.U16.Bit()
	}
	return set
}

// errorf returns an error whose message starts with the backend's name.
func (d *Device) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", d.name, fmt.Errorf(format, args...))
}

// Info describes the device as opened.
func (d *Device) Info() backend.DeviceInfo { return d.info }

// SharesMemory reports whether o is an open of the same shared logical
// device (backend.MemorySharer): its buffers are usable in d's commands.
func (d *Device) SharesMemory(o backend.Device) bool {
	od, ok := o.(*Device)
	return ok && d.dev.SharesMemory(od.dev)
}

// Stream returns the device's one stream.
func (d *Device) Stream() backend.Stream { return &d.stream }

// Counters returns the device's counters; ObjectsCreated and Replays are
// read from the C side's counts.
func (d *Device) Counters() *backend.Counters {
	d.syncObjects()
	return &d.counters
}

func (d *Device) syncObjects() {
	if !d.closed.Load() {
		c := d.dev.Counters()
		d.counters.ObjectsCreated.Store(int64(c.ObjectsCreated))
		d.counters.Replays.Store(int64(c.Replays))
	}
}

// check turns validation messages recorded since the last check into an
// error wrapping backend.ErrValidation, when the device validates. The
// layer reports for the whole process, so a message caused by another
// device's call may surface here.
func (d *Device) check(op string) error {
	if !d.validation {
		return nil
	}
	n := d.in.impl.MessageCount()
	if n == d.msgSeen.Load() {
		return nil
	}
	d.msgSeen.Store(n)
	last, k := d.in.takeMessages()
	if k == 0 {
		return nil // drained by Messages meanwhile
	}
	return d.errorf("%s: %d validation message(s), the last: %s: %w", op, k, last, backend.ErrValidation)
}

func (d *Device) errClosed(op string) error {
	return d.errorf("%s: device closed: %w", op, backend.ErrClosed)
}

// Alloc allocates a buffer (Vulkan: vkCreateBuffer, vkAllocateMemory, and
// for host-visible memory a persistent vkMapMemory; Metal:
// newBufferWithLength:options: with private or shared storage, the latter's
// contents the persistent mapping).
func (d *Device) Alloc(bytes int, where backend.Memory) (backend.Buffer, error) {
	if bytes < 0 || (where != backend.DeviceLocal && where != backend.HostVisible) {
		return nil, d.errorf("alloc %d bytes of %v: %w", bytes, where, backend.ErrInvalidArgument)
	}
	if d.closed.Load() {
		return nil, d.errClosed("alloc")
	}
	b, err := d.newBuffer(bytes, where)
	if err != nil {
		return nil, err
	}
	return d.add(b, "alloc")
}

// Import wraps page-aligned host memory (see backend.Importer) as a HostVisible
// buffer without copying (Vulkan: VK_EXT_external_memory_host, vkAllocateMemory
// with VkImportMemoryHostPointerInfoEXT; Metal: newBufferWithBytesNoCopy with
// no deallocator, the memory stays gocoll's). Devices that cannot import
// return an error wrapping backend.ErrUnsupported.
func (d *Device) Import(p []byte) (backend.Buffer, error) {
	if d.closed.Load() {
		return nil, d.errClosed("import")
	}
	cb, err := d.dev.ImportHost(p)
	d.syncObjects()
	if err != nil {
		return nil, d.errorf("import %d bytes of host memory: %w", len(p), err)
	}
	return d.add(&Buffer{d: d, b: cb, n: len(p), mem: backend.HostVisible, imported: true}, "import")
}

// Adopt makes a backend.Buffer of a shim buffer of this device that the
// caller made (such as a framework's VkBuffer wrapped by
// cshim.Device.WrapVulkanBuffer); it is not counted as an allocation.
func (d *Device) Adopt(cb *cshim.Buffer, size int, where backend.Memory) *Buffer {
	b := &Buffer{d: d, b: cb, n: size, mem: where}
	d.track(b)
	return b
}

// track adds b to the buffers Close closes; false when Close came first.
func (d *Device) track(b *Buffer) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.buffers == nil {
		return false
	}
	d.buffers[b] = struct{}{}
	return true
}

// add tracks a new buffer of the device and counts it.
func (d *Device) add(b *Buffer, op string) (backend.Buffer, error) {
	d.counters.Allocs.Add(1)
	if !d.track(b) {
		b.Close()
		return nil, d.errClosed(op)
	}
	if err := d.check(op); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (d *Device) newBuffer(bytes int, where backend.Memory) (*Buffer, error) {
	cb, err := d.dev.NewBuffer(int64(bytes), where)
	d.syncObjects()
	if err != nil {
		return nil, d.errorf("alloc %d bytes of %v memory: %w", bytes, where, err)
	}
	return &Buffer{d: d, b: cb, n: bytes, mem: where}, nil
}

// Close waits, within the drain limit (OpenOptions.DrainLimit), for the
// device's work to complete and destroys everything it owns in reverse order
// of creation (pipelines, buffers, command buffers, fences, the queue or
// logical device). When the work does not complete within the limit the
// device is declared lost: Close frees nothing the GPU may still use and
// returns an error wrapping backend.ErrDeviceLost, and the fences of that
// work fail with it. It is idempotent.
func (d *Device) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	defer close(d.closeDone)
	d.mu.Lock()
	for b := range d.buffers {
		b.closed.Store(true)
	}
	d.buffers = nil
	d.mu.Unlock()
	d.stagingMu.Lock()
	d.staging = nil // the C side frees it with the device
	d.stagingMu.Unlock()
	if err := d.dev.Close(); err != nil {
		d.lost = err
		return d.errorf("close: %w", err)
	}
	d.done.Store(math.MaxUint64) // Close waited for everything
	return nil
}

// Buffer is a buffer of a Device.
type Buffer struct {
	d        *Device
	b        *cshim.Buffer
	n        int
	mem      backend.Memory
	imported bool // host memory from Import
	closed   atomic.Bool
}

func (b *Buffer) Len() int               { return b.n }
func (b *Buffer) Memory() backend.Memory { return b.mem }

// Bytes returns the persistent mapping of a HostVisible buffer (nil for
// DeviceLocal memory and after Close).
func (b *Buffer) Bytes() []byte {
	if b.mem != backend.HostVisible || b.closed.Load() {
		return nil
	}
	return b.b.Bytes()[:b.n:b.n]
}

func (b *Buffer) span(op string, off, n int) error {
	if b.closed.Load() {
		return b.d.errorf("buffer %s: %w", op, backend.ErrClosed)
	}
	if off < 0 || off > b.n || n > b.n-off {
		return b.d.errorf("buffer %s [%d, %d) outside %d bytes: %w", op, off, off+n, b.n, backend.ErrInvalidArgument)
	}
	return nil
}

// Write copies p into the buffer at off: a memcpy into the mapping of
// HostVisible memory; for DeviceLocal memory a memcpy into the device's
// pooled staging buffer and a copy that it waits for (vkCmdCopyBuffer,
// vkQueueSubmit, vkWaitForFences), in chunks of the staging buffer's size.
func (b *Buffer) Write(off int, p []byte) error {
	if err := b.span("write", off, len(p)); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	d := b.d
	if b.mem == backend.HostVisible {
		copy(b.b.Bytes()[off:], p)
		d.counters.BytesWritten.Add(int64(len(p)))
		return nil
	}
	d.stagingMu.Lock()
	defer d.stagingMu.Unlock()
	st, err := d.stagingLocked()
	if err != nil {
		return err
	}
	for done := 0; done < len(p); {
		n := copy(st.Bytes(), p[done:])
		if err := d.dev.CopyNow(b.b, int64(off+done), st, 0, int64(n)); err != nil {
			return d.errorf("buffer write: %w", err)
		}
		done += n
		d.counters.BytesWritten.Add(int64(n))
	}
	return d.check("buffer write")
}

// Read copies the buffer at off into p, the reverse of Write.
func (b *Buffer) Read(off int, p []byte) error {
	if err := b.span("read", off, len(p)); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	d := b.d
	if b.mem == backend.HostVisible {
		copy(p, b.b.Bytes()[off:])
		d.counters.BytesRead.Add(int64(len(p)))
		return nil
	}
	d.stagingMu.Lock()
	defer d.stagingMu.Unlock()
	st, err := d.stagingLocked()
	if err != nil {
		return err
	}
	for done := 0; done < len(p); {
		n := min(len(p)-done, int(st.Size()))
		if err := d.dev.CopyNow(st, 0, b.b, int64(off+done), int64(n)); err != nil {
			return d.errorf("buffer read: %w", err)
		}
		copy(p[done:done+n], st.Bytes())
		done += n
		d.counters.BytesRead.Add(int64(n))
	}
	return d.check("buffer read")
}

// leaked returns, for an imported buffer of a device that Close could not
// drain (declared lost), the error that says its memory must be leaked;
// else nil.
func (b *Buffer) leaked() error {
	d := b.d
	if !b.imported || !d.closed.Load() {
		return nil
	}
	<-d.closeDone
	if d.lost != nil {
		return d.errorf("buffer close: imported memory the device may still use: %w", d.lost)
	}
	return nil
}

// stagingLocked returns the staging buffer, creating it on first use.
// d.stagingMu held.
func (d *Device) stagingLocked() (*cshim.Buffer, error) {
	if d.closed.Load() {
		return nil, d.errClosed("staging")
	}
	if d.staging == nil {
		size := int64(min(StagingBytes, d.raw.MaxMemoryAllocationSize))
		st, err := d.dev.NewBuffer(size, backend.HostVisible)
		d.syncObjects()
		if err != nil {
			return nil, d.errorf("staging buffer: %w", err)
		}
		d.staging = st
	}
	return d.staging, nil
}

// Close frees the buffer once the work that uses it is done: device memory
// later, without waiting; imported host memory before Close returns (after
// submitting what was recorded, if that uses it), so that the memory may be
// freed then. When that work does not complete within the drain limit the
// device is declared lost and the error wraps backend.ErrDeviceLost: the
// buffer is leaked, still importing the memory, which must then be leaked
// too, never unmapped. It is idempotent.
func (b *Buffer) Close() error {
	if b.closed.Swap(true) {
		return b.leaked()
	}
	d := b.d
	d.mu.Lock()
	if d.buffers != nil {
		delete(d.buffers, b)
	}
	d.mu.Unlock()
	if err := b.b.Close(); err != nil {
		return d.errorf("buffer close: %w", err)
	}
	return nil
}
