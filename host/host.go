// Package host is gocoll's pure-Go backend: buffers are Go memory, kernels
// are Go loops, and each Device runs its submissions in order on one worker
// goroutine, as a GPU queue does.
//
// It has two jobs. It is the reference the GPU backends are checked against:
// Reduce and Scale reproduce kernels/reduce.comp and kernels/scale.comp bit
// for bit (reduction in source order, in the element type, IEEE 754-2019
// maximum/minimum, the scale applied only when it is not 1: a scale of 1/N a
// correctly rounded division by N (backend.Divisor), any other converted to
// the element type and multiplied), and the counters count what a GPU
// backend would record, including the pieces a lowered MaxBindingBytes
// splits a kernel into. It also reduces the element types no GPU kernel
// takes yet (DeviceInfo.Kernels is backend.AllDTypes), defining what such
// kernels must compute: integers in their own type, Sum and Prod wrapping,
// never scaled (a scale other than 1 is an invalid argument); Half,
// BFloat16, F8E4M3 and F8E5M2 converted to float32, reduced and scaled there
// exactly as f32 is, and rounded once to the type, to nearest even (fp8: a
// finite overflow saturating). And it is the
// fallback when no GPU API is available: it needs no cgo, so every
// collective algorithm runs on it under the race detector.
//
// The package registers itself with backend.Register under the name "host".
package host

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Name is the name the host backend is registered under.
const Name = "host"

func init() { backend.Register(Backend{}) }

// Errors returned as they are, so that returning them does not allocate.
var (
	errClosed       = fmt.Errorf("host: device is closed: %w", backend.ErrClosed)
	errBufferClosed = fmt.Errorf("host: buffer is closed: %w", backend.ErrClosed)
)

// Backend is the host backend. The zero value is ready to use; the package
// registers one with backend.Register.
type Backend struct{}

// Name returns "host".
func (Backend) Name() string { return Name }

// Priority returns backend.PriorityHost: the fallback, chosen when no GPU
// backend is available.
func (Backend) Priority() int { return backend.PriorityHost }

// Available returns nil: the host backend can always open its device.
func (Backend) Available() error { return nil }

// Devices returns the one host device. Its description does not depend on
// GOMAXPROCS.
func (Backend) Devices() ([]backend.DeviceInfo, error) {
	return []backend.DeviceInfo{deviceInfo(backend.OpenOptions{})}, nil
}

// Open opens device 0, the only one, as a new logical device with its own
// queue. It may be called any number of times.
func (Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	if index != 0 {
		return nil, fmt.Errorf("host: device %d does not exist (the host backend has device 0 only): %w", index, backend.ErrInvalidArgument)
	}
	d, err := Open(opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// deviceInfo describes the host device as opened with opts.
func deviceInfo(opts backend.OpenOptions) backend.DeviceInfo {
	info := backend.DeviceInfo{
		Backend:          Name,
		Index:            0,
		Name:             "host",
		Type:             "cpu",
		Driver:           fmt.Sprintf("gocoll host backend (%s %s/%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH),
		APIVersion:       runtime.Version(),
		Float64:          true,
		Float32Hardware:  true,
		Float32Reason:    "reduced in Go, whose float32 arithmetic keeps subnormals",
		Kernels:          backend.AllDTypes,
		MaxBindingBytes:  math.MaxInt64,
		MaxAllocBytes:    math.MaxInt64, // in practice limited by the Go heap
		SubgroupSize:     1,
		TimestampPeriod:  1,
		HostImport:       true,
		UnifiedMemory:    true,
		MaxWorkGroupSize: 1,
	}
	if opts.MaxBindingBytes > 0 && opts.MaxBindingBytes < info.MaxBindingBytes {
		info.MaxBindingBytes = opts.MaxBindingBytes
	}
	if opts.DisableFloat64 {
		info.Float64 = false
		info.Float64Reason = "f64 kernels disabled by OpenOptions.DisableFloat64"
		info.Kernels &^= backend.F64.Bit()
	}
	return info
}

// Device is one logical host device: Go-memory buffers, one Stream, and one
// worker goroutine that executes submissions in FIFO order.
//
// Alloc, Info, Counters, SetDelay and Close may be called from any
// goroutine; the Stream is used by one goroutine at a time, as the
// backend.Device contract says. The worker goroutine runs until Close, so a
// Device must be closed.
type Device struct {
	info     backend.DeviceInfo
	counters backend.Counters
	stream   stream
	exec     executor
	fences   [fenceRing]fence // handed out in turn by Submit

	closed atomic.Bool  // set by Close; checked before recording
	delay  atomic.Int64 // SetDelay, in nanoseconds

	// completed is the ticket of the last submission the worker finished.
	// Tickets are handed out in Submit order and run in that order, so a
	// fence is signalled exactly when completed >= its ticket.
	completed atomic.Uint64

	mu        sync.Mutex
	work      sync.Cond // signalled when queue grows or stopping is set
	queue     []*batch  // submitted, not yet taken by the worker
	spare     []*batch  // the worker's previous queue, reused for the next
	free      []*batch  // executed batches, ready for recording
	submitted uint64    // last ticket handed out
	stopping  bool
	busy      bool            // the worker or a waiter is executing batches
	helping   []*batch        // the batches a waiter took from queue to run itself
	waiters   []waiter        // fences blocked in Wait
	chans     []chan struct{} // idle waiter channels, reused
	done      chan struct{}   // closed when the worker exits
}

// Open opens a new host device. It fails only when opts is invalid
// (MaxBindingBytes between 1 and 7: every binding must hold an element).
func Open(opts backend.OpenOptions) (*Device, error) {
	if opts.MaxBindingBytes > 0 && opts.MaxBindingBytes < 8 {
		return nil, fmt.Errorf("host: OpenOptions.MaxBindingBytes %d is below one f64 element: %w", opts.MaxBindingBytes, backend.ErrInvalidArgument)
	}
	d := &Device{
		info: deviceInfo(opts),
		done: make(chan struct{}),
	}
	d.work.L = &d.mu
	d.stream = stream{d: d, cur: newBatch()}
	for i := range d.fences {
		d.fences[i].d = d
	}
	go d.run()
	return d, nil
}

// Info describes the device.
func (d *Device) Info() backend.DeviceInfo { return d.info }

// SharesMemory reports true for every host device (backend.MemorySharer):
// their buffers are Go memory of one process.
func (d *Device) SharesMemory(o backend.Device) bool {
	_, ok := o.(*Device)
	return ok
}

// Counters returns the device's counters. Commands are counted when they are
// recorded, as a GPU backend counts what it records into a command buffer.
func (d *Device) Counters() *backend.Counters { return &d.counters }

// Stream returns the device's one command stream.
func (d *Device) Stream() backend.Stream { return &d.stream }

// SetDelay makes the worker sleep for delay before it executes each later
// submission, so tests can slow one device down for real (for example to
// exercise adaptive strategies or cancelled waits). Zero or less turns the
// delay off. It is safe to call at any time.
func (d *Device) SetDelay(delay time.Duration) { d.delay.Store(int64(delay)) }

// Close waits for every submitted batch to finish, stops the worker and makes
// later calls on the device, its stream and its buffers fail with an error
// wrapping backend.ErrClosed. Work recorded but not submitted is dropped.
// Fences of submitted work stay valid (they are signalled). Close is
// idempotent and safe to call from several goroutines.
func (d *Device) Close() error {
	d.mu.Lock()
	if !d.stopping {
		d.stopping = true
		d.closed.Store(true)
		d.work.Signal()
	}
	d.mu.Unlock()
	<-d.done
	return nil
}

// Alloc returns a buffer of exactly n bytes of Go memory, 8-byte aligned so
// that float64 views of it are aligned. Both memory kinds are the same
// memory; only Bytes tells them apart.
func (d *Device) Alloc(n int, where backend.Memory) (backend.Buffer, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	if n < 0 {
		return nil, fmt.Errorf("host: alloc of %d bytes: %w", n, backend.ErrInvalidArgument)
	}
	if where != backend.DeviceLocal && where != backend.HostVisible {
		return nil, fmt.Errorf("host: alloc: unknown memory kind %d: %w", int(where), backend.ErrInvalidArgument)
	}
	data, err := allocBytes(n)
	if err != nil {
		return nil, err
	}
	d.counters.Allocs.Add(1)
	d.counters.ObjectsCreated.Add(1)
	return &buffer{dev: d, mem: where, data: data}, nil
}

// allocBytes returns n zeroed bytes backed by []uint64, so the first byte is
// 8-byte aligned.
func allocBytes(n int) (b []byte, err error) {
	if n == 0 {
		return []byte{}, nil
	}
	words := n / 8
	if n%8 != 0 {
		words++
	}
	defer func() {
		// make panics (recoverably) when the length is beyond what the Go
		// heap can ever hold; a real shortage of memory is fatal in Go.
		if r := recover(); r != nil {
			err = fmt.Errorf("host: alloc of %d bytes: %v: %w", n, r, backend.ErrOutOfMemory)
		}
	}()
	w := make([]uint64, words)
	return unsafeBytes(w, n), nil
}

// run is the device's worker: it executes submitted batches in FIFO order and
// signals their fences, like a GPU queue.
func (d *Device) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		for d.busy || (len(d.queue) == 0 && !d.stopping) {
			d.work.Wait()
		}
		if len(d.queue) == 0 { // stopping, and nothing left to run
			d.mu.Unlock()
			return
		}
		todo := d.queue
		d.queue, d.spare = d.spare[:0], nil
		d.busy = true
		d.mu.Unlock()

		for i, b := range todo {
			if delay := d.delay.Load(); delay > 0 {
				time.Sleep(time.Duration(delay))
			}
			d.exec.run(b)
			d.finish(b)
			todo[i] = nil
		}

		d.mu.Lock()
		d.spare = todo[:0]
		d.busy = false
		d.mu.Unlock()
	}
}

// helpLimit bounds the bytes a waiter executes itself (help): a batch that
// small runs in microseconds, so the waiter's ctx is not kept waiting.
const helpLimit = 256 << 10

// help runs, on the waiting goroutine, the queued batches up to and
// including ticket's when no batch is executing, no delay is set and they
// are small, and reports whether it did. A waiter that would otherwise park
// until the worker wakes, runs and wakes it saves both wake-ups, which on a
// machine with few cores cost more than a small batch. FIFO order holds:
// the batches run in queue order, with busy keeping the worker out. d.mu is
// held on entry and on return.
func (d *Device) help(ticket uint64) bool {
	if d.busy || len(d.queue) == 0 || d.delay.Load() > 0 {
		return false
	}
	k, bytes := 0, 0
	for k < len(d.queue) && d.queue[k].ticket <= ticket {
		for i := range d.queue[k].cmds {
			bytes += len(d.queue[k].cmds[i].dst)
		}
		k++
	}
	if k == 0 || d.queue[k-1].ticket != ticket || bytes > helpLimit {
		return false
	}
	d.helping = append(d.helping[:0], d.queue[:k]...)
	n := copy(d.queue, d.queue[k:])
	clear(d.queue[n:])
	d.queue = d.queue[:n]
	d.busy = true
	d.mu.Unlock()
	for _, b := range d.helping {
		d.exec.run(b)
		d.finish(b)
	}
	d.mu.Lock()
	clear(d.helping)
	d.busy = false
	if len(d.queue) > 0 || d.stopping {
		d.work.Signal()
	}
	return true
}

// finish publishes b's ticket as completed, wakes the fences it satisfies and
// returns b to the free list.
func (d *Device) finish(b *batch) {
	ticket := b.ticket
	b.reset()
	d.mu.Lock()
	d.completed.Store(ticket)
	for i := 0; i < len(d.waiters); {
		w := d.waiters[i]
		if w.ticket > ticket {
			i++
			continue
		}
		w.ch <- struct{}{} // buffered, and each waiter is signalled once
		last := len(d.waiters) - 1
		d.waiters[i] = d.waiters[last]
		d.waiters[last] = waiter{}
		d.waiters = d.waiters[:last]
	}
	d.free = append(d.free, b)
	d.mu.Unlock()
}

// waiter is a fence blocked in Wait.
type waiter struct {
	ticket uint64
	ch     chan struct{}
}
