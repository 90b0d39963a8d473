//go:build cgo && !novulkan

package vulkan

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// Kernel kinds, indexing device.pipes and device.kinfo.
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
	numKinds
)

var kindNames = [numKinds]string{
	kernels.ReduceF32, kernels.ReduceF64, kernels.ScaleF32, kernels.ScaleF64,
	kernels.Reduce4F32, kernels.Reduce4F64, kernels.Scale4F32, kernels.Scale4F64,
}

const (
	// fenceRing is the number of Fence objects a device hands out in turn,
	// so Submit allocates nothing. A Fence stays exact for fenceRing later
	// submissions; after that it stands for a later submission, so Wait may
	// wait longer but never returns before its own work is done.
	fenceRing = 1024
	// stagingBytes is the size of the pooled host-visible buffer that
	// DeviceLocal Write and Read go through.
	stagingBytes = 4 << 20
	// workGroupSize is the kernels' work-group size where the device allows.
	workGroupSize = 256
)

// device is one rank's logical device.
type device struct {
	dev  *cshim.Device
	raw  cshim.DeviceInfo
	info backend.DeviceInfo

	counters backend.Counters
	stream   stream
	fences   [fenceRing]fence
	done     atomic.Uint64 // every ticket <= done is known complete

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

	// pipes caches pipelines by kind, op, source count and scale flag. Only
	// the stream's goroutine touches it.
	pipes [numKinds][backend.NumOps][kernels.MaxSources + 1][2]*cshim.Kernel
	// scratch holds partial results of multi-pass reductions whose
	// destination is also a later source. Only the stream touches it.
	scratch *buffer
	// vec chooses and counts the 16-byte kernels (vec.go). Only the stream
	// touches it.
	vec vecState

	closed  atomic.Bool
	mu      sync.Mutex // guards buffers
	buffers map[*buffer]struct{}

	stagingMu sync.Mutex // guards staging and serializes staged transfers
	staging   *cshim.Buffer
}

var (
	_ backend.Device = (*device)(nil)
	_ backend.Buffer = (*buffer)(nil)
)

func open(index int, opts backend.OpenOptions) (*device, error) {
	raw := inst.devices[index]
	cd, err := inst.impl.Open(index, cshim.OpenOptions{DisableFloat64: opts.DisableFloat64, ShareDevice: opts.ShareDevice})
	if err != nil {
		return nil, fmt.Errorf("vulkan: open device %d (%s): %w", index, raw.Name, err)
	}
	d := &device{
		dev:        cd,
		raw:        raw,
		info:       deviceInfo(raw, opts),
		align:      int64(max(raw.MinStorageBufferOffsetAlignment, 1)),
		wg:         min(workGroupSize, raw.MaxComputeWorkGroupInvocations, raw.MaxComputeWorkGroupSize[0]),
		maxGroups:  raw.MaxComputeWorkGroupCount[0],
		validation: inst.info.Validation,
		buffers:    map[*buffer]struct{}{},
	}
	d.info.Float64 = cd.Float64()
	d.maxBind = d.info.MaxBindingBytes
	d.stream.d = d
	for i := range d.fences {
		d.fences[i].d = d
	}
	for k, name := range kindNames {
		if d.kinfo[k], err = kernels.Lookup(name); err != nil {
			cd.Close()
			return nil, fmt.Errorf("vulkan: %w", err)
		}
	}
	d.syncObjects()
	if d.validation {
		d.msgSeen.Store(inst.impl.MessageCount())
	}
	return d, nil
}

// Info describes the device as opened.
func (d *device) Info() backend.DeviceInfo { return d.info }

// Stream returns the device's one stream.
func (d *device) Stream() backend.Stream { return &d.stream }

// Counters returns the device's counters; ObjectsCreated is read from the
// C side's count of Vulkan objects created.
func (d *device) Counters() *backend.Counters {
	d.syncObjects()
	return &d.counters
}

func (d *device) syncObjects() {
	if !d.closed.Load() {
		d.counters.ObjectsCreated.Store(int64(d.dev.Counters().ObjectsCreated))
	}
}

// check turns validation messages recorded since the last check into an
// error wrapping backend.ErrValidation, when the device validates. The
// layer reports for the whole process, so a message caused by another
// device's call may surface here.
func (d *device) check(op string) error {
	if !d.validation {
		return nil
	}
	n := inst.impl.MessageCount()
	if n == d.msgSeen.Load() {
		return nil
	}
	d.msgSeen.Store(n)
	last, k := takeValidation()
	if k == 0 {
		return nil // drained by ValidationMessages meanwhile
	}
	return fmt.Errorf("vulkan: %s: %d validation message(s), the last: %s: %w", op, k, last, backend.ErrValidation)
}

func (d *device) errClosed(op string) error {
	return fmt.Errorf("vulkan: %s: device closed: %w", op, backend.ErrClosed)
}

// Alloc allocates a buffer (vkCreateBuffer, vkAllocateMemory; host-visible
// memory is persistently mapped with vkMapMemory).
func (d *device) Alloc(bytes int, where backend.Memory) (backend.Buffer, error) {
	if bytes < 0 || (where != backend.DeviceLocal && where != backend.HostVisible) {
		return nil, fmt.Errorf("vulkan: alloc %d bytes of %v: %w", bytes, where, backend.ErrInvalidArgument)
	}
	if d.closed.Load() {
		return nil, d.errClosed("alloc")
	}
	b, err := d.newBuffer(bytes, where)
	if err != nil {
		return nil, err
	}
	d.counters.Allocs.Add(1)
	d.mu.Lock()
	d.buffers[b] = struct{}{}
	d.mu.Unlock()
	if err := d.check("alloc"); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (d *device) newBuffer(bytes int, where backend.Memory) (*buffer, error) {
	cb, err := d.dev.NewBuffer(int64(bytes), where)
	d.syncObjects()
	if err != nil {
		return nil, fmt.Errorf("vulkan: alloc %d bytes of %v memory: %w", bytes, where, err)
	}
	return &buffer{d: d, b: cb, n: bytes, mem: where}, nil
}

// Close waits for the device to go idle and destroys everything it owns
// (vkDeviceWaitIdle, then pipelines, buffers, fences, command pools and the
// VkDevice, in reverse order of creation). It is idempotent.
func (d *device) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.mu.Lock()
	for b := range d.buffers {
		b.closed.Store(true)
	}
	d.buffers = nil
	d.mu.Unlock()
	d.stagingMu.Lock()
	d.staging = nil // the C side frees it with the device
	d.stagingMu.Unlock()
	err := d.dev.Close()
	d.done.Store(math.MaxUint64) // Close waited for everything
	if err != nil {
		return fmt.Errorf("vulkan: close: %w", err)
	}
	return nil
}

// buffer is a Vulkan buffer of a device.
type buffer struct {
	d      *device
	b      *cshim.Buffer
	n      int
	mem    backend.Memory
	closed atomic.Bool
}

func (b *buffer) Len() int               { return b.n }
func (b *buffer) Memory() backend.Memory { return b.mem }

// Bytes returns the persistent mapping of a HostVisible buffer (nil for
// DeviceLocal memory and after Close).
func (b *buffer) Bytes() []byte {
	if b.mem != backend.HostVisible || b.closed.Load() {
		return nil
	}
	return b.b.Bytes()[:b.n:b.n]
}

func (b *buffer) span(op string, off, n int) error {
	if b.closed.Load() {
		return fmt.Errorf("vulkan: buffer %s: %w", op, backend.ErrClosed)
	}
	if off < 0 || off > b.n || n > b.n-off {
		return fmt.Errorf("vulkan: buffer %s [%d, %d) outside %d bytes: %w", op, off, off+n, b.n, backend.ErrInvalidArgument)
	}
	return nil
}

// Write copies p into the buffer at off: a memcpy into the mapping of
// HostVisible memory; for DeviceLocal memory a memcpy into the device's
// pooled staging buffer and a copy that it waits for (vkCmdCopyBuffer,
// vkQueueSubmit, vkWaitForFences), in chunks of the staging buffer's size.
func (b *buffer) Write(off int, p []byte) error {
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
			return fmt.Errorf("vulkan: buffer write: %w", err)
		}
		done += n
		d.counters.BytesWritten.Add(int64(n))
	}
	return d.check("buffer write")
}

// Read copies the buffer at off into p, the reverse of Write.
func (b *buffer) Read(off int, p []byte) error {
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
			return fmt.Errorf("vulkan: buffer read: %w", err)
		}
		copy(p[done:done+n], st.Bytes())
		done += n
		d.counters.BytesRead.Add(int64(n))
	}
	return d.check("buffer read")
}

// stagingLocked returns the staging buffer, creating it on first use.
// d.stagingMu held.
func (d *device) stagingLocked() (*cshim.Buffer, error) {
	if d.closed.Load() {
		return nil, d.errClosed("staging")
	}
	if d.staging == nil {
		size := int64(min(stagingBytes, d.raw.MaxMemoryAllocationSize))
		st, err := d.dev.NewBuffer(size, backend.HostVisible)
		d.syncObjects()
		if err != nil {
			return nil, fmt.Errorf("vulkan: staging buffer: %w", err)
		}
		d.staging = st
	}
	return d.staging, nil
}

// Close frees the buffer once the work submitted before it is done. It is
// idempotent.
func (b *buffer) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	d := b.d
	d.mu.Lock()
	if d.buffers != nil {
		delete(d.buffers, b)
	}
	d.mu.Unlock()
	if err := b.b.Close(); err != nil {
		return fmt.Errorf("vulkan: buffer close: %w", err)
	}
	return nil
}
