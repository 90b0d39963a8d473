// Package faultinject wraps a backend.Backend so tests can make the devices it
// opens fail in controlled ways: the k-th allocation, recorded command,
// submission or fence wait fails, a wait is delayed or never completes, or the
// device is lost. It sits at the backend seam, so the collective algorithms
// meet the faults exactly where a real driver would report them.
//
// The wrapper also keeps the books a test needs to check ownership: buffers
// allocated minus buffers closed per device (leaks), and which submitted work
// that uses imported host memory has not finished (so a test can tell whether
// a call returned while a device still reads or writes the caller's memory).
//
// Register a wrapper under its own name with backend.Register, then Arm a
// Plan before opening a group on it:
//
//	fi := faultinject.New("faultinject-host", hostBackend)
//	backend.Register(fi)
//	inj := fi.Arm(faultinject.Plan{Kind: faultinject.FailSubmit, Device: 1, K: 3})
//	g, err := collective.NewGroup(ctx, collective.Options{Backend: fi.Name(), ...})
//
// Devices opened while a Plan is armed belong to its Injection, which
// reports whether the fault fired and what the devices leaked.
package faultinject

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Kind is what a Plan injects.
type Kind int

const (
	// None injects nothing: the wrapper only keeps its books.
	None Kind = iota
	// FailAlloc fails the k-th Alloc or Import with an error wrapping
	// backend.ErrOutOfMemory; nothing is allocated.
	FailAlloc
	// FailRecord fails the k-th recorded command (Copy, Reduce, Scale,
	// ReduceMulti, Pack, Unpack, TopK) with an error wrapping backend.ErrOutOfMemory;
	// the command is not recorded.
	FailRecord
	// FailSubmit makes the k-th Submit return an error wrapping
	// backend.ErrOutOfMemory. The work recorded before it has already run
	// when Submit returns (a backend cannot take back what it recorded), so
	// nothing it does lands later.
	FailSubmit
	// FailWait makes the k-th Fence.Wait return an error wrapping
	// backend.ErrOutOfMemory once the work is done.
	FailWait
	// DelayWait makes the k-th Fence.Wait sleep for Delay (or until its ctx
	// ends) before it waits.
	DelayWait
	// HangWait makes the fence of the k-th Fence.Wait never complete: that
	// wait and every later wait on it or on later work of the device block
	// until their ctx ends, and later submissions never run. The device's
	// work submitted so far has run when the hang starts, so a hung device
	// writes nothing afterwards.
	HangWait
	// DeviceLost loses the device at its k-th counted call (Alloc, Import,
	// a recorded command, Submit or Wait): that call and every later one
	// fails with an error wrapping backend.ErrDeviceLost, and so do staged
	// Write and Read of device-local buffers. Work submitted before the
	// loss has run when the first error is returned.
	DeviceLost
	// SlowDevice slows the device down from its k-th Submit: each later
	// submission starts Delay late (backends with a SetDelay hook, such as
	// the host backend; elsewhere it delays each later Wait instead).
	SlowDevice
	numKinds
)

var kindNames = [...]string{None: "none", FailAlloc: "fail-alloc", FailRecord: "fail-record", FailSubmit: "fail-submit",
	FailWait: "fail-wait", DelayWait: "delay-wait", HangWait: "hang-wait", DeviceLost: "device-lost", SlowDevice: "slow-device"}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Kinds lists every Kind but None.
func Kinds() []Kind {
	var ks []Kind
	for k := FailAlloc; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Plan says which call fails and how.
type Plan struct {
	Kind Kind
	// Device is the index, in opening order, of the device whose calls are
	// counted (collective.NewGroup opens rank r's device r-th); -1 counts
	// the calls of every device together.
	Device int
	// K is the 1-based number of the counted call that triggers the fault.
	K int64
	// Delay is the delay of DelayWait and SlowDevice.
	Delay time.Duration
	// NoFloat64 lists devices (in opening order) that report no f64
	// kernels, so a group mixes devices with and without them.
	NoFloat64 []int
}

func (p Plan) String() string {
	s := fmt.Sprintf("%s #%d on device %d", p.Kind, p.K, p.Device)
	if p.Device < 0 {
		s = fmt.Sprintf("%s #%d on any device", p.Kind, p.K)
	}
	if p.Kind == DelayWait || p.Kind == SlowDevice {
		s += fmt.Sprintf(" (%v)", p.Delay)
	}
	return s
}

// ErrInjected is wrapped by every error the wrapper makes up (with the
// backend sentinel a driver would report), so tests can tell an injected
// failure from a real one.
var ErrInjected = errors.New("faultinject: injected fault")

// event is a kind of counted call.
type event int

const (
	evAlloc event = iota
	evRecord
	evSubmit
	evWait
	numEvents
)

// counts reports whether a Kind counts calls of event e.
func (k Kind) counts(e event) bool {
	switch k {
	case FailAlloc:
		return e == evAlloc
	case FailRecord:
		return e == evRecord
	case FailSubmit, SlowDevice:
		return e == evSubmit
	case FailWait, DelayWait, HangWait:
		return e == evWait
	case DeviceLost:
		return true
	}
	return false
}

// Backend wraps another backend. It is safe for concurrent use.
type Backend struct {
	name  string
	inner backend.Backend

	mu    sync.Mutex
	armed *Injection
}

// New wraps inner under name (register it with backend.Register).
func New(name string, inner backend.Backend) *Backend {
	return &Backend{name: name, inner: inner}
}

// Name returns the name the wrapper was created with.
func (b *Backend) Name() string { return b.name }

// Priority returns -1: the wrapper is chosen by name only, never instead of
// the backend it wraps.
func (b *Backend) Priority() int { return -1 }

// Inner returns the wrapped backend.
func (b *Backend) Inner() backend.Backend { return b.inner }

// Available reports the wrapped backend's availability.
func (b *Backend) Available() error { return b.inner.Available() }

// Devices lists the wrapped backend's devices.
func (b *Backend) Devices() ([]backend.DeviceInfo, error) { return b.inner.Devices() }

// Arm makes the devices opened from now on (until the next Arm) follow p and
// returns the Injection that reports on them.
func (b *Backend) Arm(p Plan) *Injection {
	in := &Injection{plan: p}
	b.mu.Lock()
	b.armed = in
	b.mu.Unlock()
	return in
}

// Open opens a device of the wrapped backend and wraps it. Without an armed
// Plan the device injects nothing.
func (b *Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	b.mu.Lock()
	in := b.armed
	if in == nil {
		in = &Injection{plan: Plan{Kind: None}}
		b.armed = in
	}
	b.mu.Unlock()
	d, err := b.inner.Open(index, opts)
	if err != nil {
		return nil, err
	}
	return in.wrap(d), nil
}

// Injection is the record of one armed Plan: the devices opened under it,
// whether the fault fired, and the books on their buffers.
type Injection struct {
	plan Plan

	mu     sync.Mutex
	devs   []*device
	global [numEvents]int64
	fired  string
}

// Plan returns the plan.
func (in *Injection) Plan() Plan { return in.plan }

// Fired returns a description of the call the fault fired on, or "" if it
// has not fired.
func (in *Injection) Fired() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.fired
}

// Devices returns the number of devices opened under the injection.
func (in *Injection) Devices() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.devs)
}

// Live returns, per device, the buffers allocated or imported minus those
// closed.
func (in *Injection) Live() []int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]int64, len(in.devs))
	for i, d := range in.devs {
		out[i] = d.live.Load()
	}
	return out
}

// Lost returns, per device, whether the injection lost it (DeviceLost) or
// hung it (HangWait): the devices whose memory a collective may leak.
func (in *Injection) Lost() []bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]bool, len(in.devs))
	for i, d := range in.devs {
		out[i] = d.lost.Load() || d.hung.Load()
	}
	return out
}

// InFlight describes submitted work, on any device of the injection that is
// not lost or hung, that still reads or writes host memory overlapping p (an
// imported buffer such as a collective.HostBuffer), or returns "". A
// collective that returns while this is not "" broke the rule that no device
// touches a caller's memory after the call returned.
func (in *Injection) InFlight(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	hi := lo + uintptr(len(p))
	in.mu.Lock()
	devs := append([]*device(nil), in.devs...)
	in.mu.Unlock()
	for _, d := range devs {
		if s := d.busy(lo, hi); s != "" {
			return s
		}
	}
	return ""
}

func (in *Injection) wrap(inner backend.Device) backend.Device {
	in.mu.Lock()
	d := &device{in: in, idx: len(in.devs), inner: inner}
	in.devs = append(in.devs, d)
	in.mu.Unlock()
	d.st.d = d
	d.stream = wrapStream(&d.st, inner.Stream())
	if _, ok := inner.(backend.Importer); ok {
		return &importerDevice{device: d}
	}
	return d
}

// trigger counts a call of event e on d and reports whether the plan's
// fault fires on it. A plan fires at most once.
func (in *Injection) trigger(d *device, e event, what string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	d.count[e]++
	in.global[e]++
	p := in.plan
	if p.Kind == None || !p.Kind.counts(e) || (p.Device >= 0 && p.Device != d.idx) || in.fired != "" {
		return false
	}
	n := in.countLocked(p.Kind, p.Device)
	if n != p.K {
		return false
	}
	in.fired = fmt.Sprintf("%s on device %d (%s, call #%d of those counted)", p.Kind, d.idx, what, n)
	return true
}

// Count returns how many calls that Kind k counts the devices of the
// injection made so far: device's (in opening order), or every device's
// for -1. Arm a None plan, run a workload and Count, to draw a K that fires.
func (in *Injection) Count(k Kind, device int) int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.countLocked(k, device)
}

func (in *Injection) countLocked(k Kind, device int) int64 {
	var n int64
	for e := event(0); e < numEvents; e++ {
		if !k.counts(e) {
			continue
		}
		if device < 0 {
			n += in.global[e]
		} else if device < len(in.devs) {
			n += in.devs[device].count[e]
		}
	}
	return n
}

func (d *device) injected(what string, sentinel error) error {
	return fmt.Errorf("faultinject: device %d: %s: %w (%w)", d.idx, what, sentinel, ErrInjected)
}

func (d *device) lostErr(what string) error {
	return fmt.Errorf("faultinject: device %d: %s: %w (%w)", d.idx, what, backend.ErrDeviceLost, ErrInjected)
}

// device wraps one backend.Device.
type device struct {
	in     *Injection
	idx    int
	inner  backend.Device
	st     stream
	stream backend.Stream

	count [numEvents]int64 // under in.mu
	live  atomic.Int64
	lost  atomic.Bool
	hung  atomic.Bool

	mu        sync.Mutex
	seq       uint64   // submissions handed out
	hungFrom  uint64   // first submission that never completes (when hung)
	doneSeq   uint64   // every submission up to this one is known complete
	slowWait  int64    // SlowDevice without a SetDelay hook: delay of each wait (ns)
	inflight  []*fence // submitted, not known complete
	recording []*buffer
}

func (d *device) Info() backend.DeviceInfo {
	inf := d.inner.Info()
	for _, i := range d.in.plan.NoFloat64 {
		if i == d.idx {
			inf.Float64, inf.Float64Reason = false, "hidden by faultinject (Plan.NoFloat64)"
		}
	}
	return inf
}
func (d *device) Counters() *backend.Counters { return d.inner.Counters() }
func (d *device) Stream() backend.Stream      { return d.stream }

// Unwrap returns the wrapped device.
func (d *device) Unwrap() backend.Device { return d.inner }

// SharesMemory asks the wrapped devices (backend.MemorySharer).
func (d *device) SharesMemory(o backend.Device) bool {
	for {
		w, ok := o.(interface{ Unwrap() backend.Device })
		if !ok {
			break
		}
		o = w.Unwrap()
	}
	return backend.SharesMemory(d.inner, o)
}

// Alloc allocates on the wrapped device unless the plan fails it.
func (d *device) Alloc(bytes int, where backend.Memory) (backend.Buffer, error) {
	if d.in.trigger(d, evAlloc, "alloc") {
		switch d.in.plan.Kind {
		case FailAlloc:
			return nil, d.injected("alloc", backend.ErrOutOfMemory)
		case DeviceLost:
			d.loseDevice()
		}
	}
	if d.lost.Load() {
		return nil, d.lostErr("alloc")
	}
	b, err := d.inner.Alloc(bytes, where)
	if err != nil {
		return nil, err
	}
	d.live.Add(1)
	return &buffer{d: d, inner: b}, nil
}

type importerDevice struct{ *device }

// Import imports host memory on the wrapped device unless the plan fails it.
func (d *importerDevice) Import(p []byte) (backend.Buffer, error) {
	if d.in.trigger(d.device, evAlloc, "import") {
		switch d.in.plan.Kind {
		case FailAlloc:
			return nil, d.injected("import", backend.ErrOutOfMemory)
		case DeviceLost:
			d.loseDevice()
		}
	}
	if d.lost.Load() {
		return nil, d.lostErr("import")
	}
	b, err := d.inner.(backend.Importer).Import(p)
	if err != nil {
		return nil, err
	}
	d.live.Add(1)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return &buffer{d: d.device, inner: b, hostLo: lo, hostHi: lo + uintptr(len(p))}, nil
}

// Close closes the wrapped device. A lost or hung device reports the loss
// (as vkDeviceWaitIdle does) after closing.
func (d *device) Close() error {
	err := d.inner.Close()
	if d.lost.Load() || d.hung.Load() {
		return errors.Join(err, d.lostErr("close"))
	}
	return err
}

// drain waits for everything submitted to the wrapped device, so that a lost
// or hung device writes nothing after the fault.
func (d *device) drain() {
	d.mu.Lock()
	fs := append([]*fence(nil), d.inflight...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range fs {
		if f.inner != nil {
			_ = f.inner.Wait(ctx)
		}
	}
}

func (d *device) loseDevice() {
	d.drain()
	d.lost.Store(true)
}

// hang makes submission s and every later one never complete.
func (d *device) hang(s uint64) {
	d.drain()
	d.mu.Lock()
	if !d.hung.Load() || s < d.hungFrom {
		d.hungFrom = s
	}
	d.hung.Store(true)
	d.mu.Unlock()
}

// completed records that submission s finished (and, the queue being FIFO,
// every earlier one).
func (d *device) completed(s uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s <= d.doneSeq {
		return
	}
	d.doneSeq = s
	keep := d.inflight[:0]
	for _, f := range d.inflight {
		if f.seq > s {
			keep = append(keep, f)
		}
	}
	for i := len(keep); i < len(d.inflight); i++ {
		d.inflight[i] = nil
	}
	d.inflight = keep
}

// busy describes submitted work of d that uses host memory overlapping
// [lo, hi) and has not finished, or returns "".
func (d *device) busy(lo, hi uintptr) string {
	if d.lost.Load() || d.hung.Load() {
		return "" // a lost device's memory is leaked, never freed
	}
	d.mu.Lock()
	fs := append([]*fence(nil), d.inflight...)
	done, last := d.doneSeq, d.seq
	d.mu.Unlock()
	for _, f := range fs {
		// Backends may recycle fence objects after many submissions (the
		// host backend after 256): probe only recent ones.
		if f.seq <= done || f.done.Load() || f.inner == nil || last-f.seq >= 128 {
			continue
		}
		var hit *buffer
		for _, b := range f.bufs {
			if b.hostLo < hi && lo < b.hostHi {
				hit = b
				break
			}
		}
		if hit == nil {
			continue
		}
		// A short wait tells done from running on every backend (some
		// return at once on a done context without looking).
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		err := f.inner.Wait(ctx)
		cancel()
		if err != nil {
			return fmt.Sprintf("device %d: submission #%d, which uses %d bytes of imported host memory, has not finished", d.idx, f.seq, hit.Len())
		}
	}
	return ""
}

// buffer wraps one backend.Buffer.
type buffer struct {
	d      *device
	inner  backend.Buffer
	closed atomic.Bool
	// hostLo, hostHi: the host memory an imported buffer wraps (else 0).
	hostLo, hostHi uintptr
}

func (b *buffer) Len() int                { return b.inner.Len() }
func (b *buffer) Memory() backend.Memory  { return b.inner.Memory() }
func (b *buffer) Bytes() []byte           { return b.inner.Bytes() }
func (b *buffer) Unwrap() backend.Buffer  { return b.inner }
func (b *buffer) String() string          { return fmt.Sprintf("faultinject buffer of %d bytes", b.Len()) }
func (b *buffer) staged() bool            { return b.inner.Memory() == backend.DeviceLocal }
func (b *buffer) ioErr(what string) error { return b.d.ioErr(what, b) }

func (d *device) ioErr(what string, b *buffer) error {
	if !b.staged() {
		return nil // mapped memory needs no queue
	}
	if d.lost.Load() {
		return d.lostErr(what)
	}
	if d.hung.Load() {
		return d.injected(what+" (staging on a hung queue)", backend.ErrTimeout)
	}
	return nil
}

// Write writes through the wrapped buffer; staging fails on a lost or hung
// device.
func (b *buffer) Write(off int, p []byte) error {
	if err := b.ioErr("write"); err != nil {
		return err
	}
	return b.inner.Write(off, p)
}

// Read reads through the wrapped buffer; staging fails on a lost or hung
// device.
func (b *buffer) Read(off int, p []byte) error {
	if err := b.ioErr("read"); err != nil {
		return err
	}
	return b.inner.Read(off, p)
}

// Close closes the wrapped buffer, once.
func (b *buffer) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.d.live.Add(-1)
	return b.inner.Close()
}

// fence wraps one submission.
type fence struct {
	d     *device
	inner backend.Fence // nil when the submission never ran (hung device)
	seq   uint64
	bufs  []*buffer
	done  atomic.Bool
}

func (f *fence) uses(b *buffer) bool {
	for _, x := range f.bufs {
		if x == b {
			return true
		}
	}
	return false
}

// Wait waits for the submission, unless the plan delays, fails or hangs it.
func (f *fence) Wait(ctx context.Context) error {
	d := f.d
	if d.in.trigger(d, evWait, "wait") {
		switch d.in.plan.Kind {
		case FailWait:
			if err := f.waitInner(ctx); err != nil {
				return err
			}
			return d.injected("wait", backend.ErrOutOfMemory)
		case DelayWait:
			sleep(ctx, d.in.plan.Delay)
		case HangWait:
			s := f.seq
			if f.done.Load() {
				d.mu.Lock()
				s = d.seq + 1 // the next submission hangs
				d.mu.Unlock()
			}
			d.hang(s)
		case DeviceLost:
			d.loseDevice()
		}
	}
	if f.done.Load() {
		return nil
	}
	if d.lost.Load() {
		return d.lostErr("wait")
	}
	if ns := atomic.LoadInt64(&d.slowWait); ns > 0 {
		sleep(ctx, time.Duration(ns))
	}
	if d.hung.Load() {
		d.mu.Lock()
		hung := f.seq >= d.hungFrom
		d.mu.Unlock()
		if hung {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return f.waitInner(ctx)
}

func (f *fence) waitInner(ctx context.Context) error {
	if f.inner == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := f.inner.Wait(ctx); err != nil {
		return err
	}
	f.done.Store(true)
	f.d.completed(f.seq)
	return nil
}

func sleep(ctx context.Context, t time.Duration) {
	tm := time.NewTimer(t)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// stream wraps the device's one stream.
type stream struct {
	d    *device
	srcs []backend.Region
}

func (s *stream) inner() backend.Stream { return s.d.inner.Stream() }

// unwrap maps a region of a wrapped buffer onto the wrapped backend's buffer
// and notes that the current recording uses it.
func (s *stream) unwrap(r backend.Region) backend.Region {
	if b, ok := r.Buf.(*buffer); ok {
		s.d.mu.Lock()
		s.d.recording = append(s.d.recording, b)
		s.d.mu.Unlock()
		r.Buf = b.inner
	}
	return r
}

// record runs the plan's checks for one recorded command; skip means the
// command must not reach the wrapped stream (the device is hung).
func (s *stream) record(what string) (skip bool, err error) {
	d := s.d
	if d.in.trigger(d, evRecord, what) {
		switch d.in.plan.Kind {
		case FailRecord:
			return true, d.injected(what, backend.ErrOutOfMemory)
		case DeviceLost:
			d.loseDevice()
		}
	}
	if d.lost.Load() {
		return true, d.lostErr(what)
	}
	return d.hung.Load(), nil
}

func (s *stream) Copy(dst, src backend.Region) error {
	skip, err := s.record("copy")
	if err != nil {
		return err
	}
	dst, src = s.unwrap(dst), s.unwrap(src)
	if skip {
		return nil
	}
	return s.inner().Copy(dst, src)
}

func (s *stream) Reduce(op backend.Op, dt backend.DType, dst backend.Region, srcs []backend.Region, scale float64) error {
	skip, err := s.record("reduce")
	if err != nil {
		return err
	}
	dst = s.unwrap(dst)
	s.srcs = s.srcs[:0]
	for _, r := range srcs {
		s.srcs = append(s.srcs, s.unwrap(r))
	}
	if skip {
		return nil
	}
	return s.inner().Reduce(op, dt, dst, s.srcs, scale)
}

func (s *stream) Scale(dt backend.DType, dst, src backend.Region, scale float64) error {
	skip, err := s.record("scale")
	if err != nil {
		return err
	}
	dst, src = s.unwrap(dst), s.unwrap(src)
	if skip {
		return nil
	}
	return s.inner().Scale(dt, dst, src, scale)
}

// Submit submits what was recorded, unless the plan fails it or the device
// is lost or hung.
func (s *stream) Submit() (backend.Fence, error) {
	d := s.d
	fail := false
	if d.in.trigger(d, evSubmit, "submit") {
		switch d.in.plan.Kind {
		case FailSubmit:
			fail = true
		case SlowDevice:
			if sd, ok := d.inner.(interface{ SetDelay(time.Duration) }); ok {
				sd.SetDelay(d.in.plan.Delay)
			} else {
				atomic.StoreInt64(&d.slowWait, int64(d.in.plan.Delay))
			}
		case DeviceLost:
			d.loseDevice()
		}
	}
	d.mu.Lock()
	bufs := d.recording
	d.recording = nil
	d.mu.Unlock()
	if d.lost.Load() {
		return nil, d.lostErr("submit")
	}
	var inner backend.Fence
	if !d.hung.Load() {
		var err error
		if inner, err = s.inner().Submit(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	d.seq++
	f := &fence{d: d, inner: inner, seq: d.seq, bufs: bufs}
	d.inflight = append(d.inflight, f)
	if len(d.inflight) > 512 {
		// Long done; keep the books bounded.
		d.inflight = append(d.inflight[:0], d.inflight[256:]...)
	}
	d.mu.Unlock()
	if fail {
		// The recorded work cannot be taken back: let it finish, so the
		// failed submission writes nothing after Submit returned.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := f.waitInner(ctx)
		cancel()
		return nil, errors.Join(err, d.injected("submit", backend.ErrOutOfMemory))
	}
	return f, nil
}

// compressorStream is a stream whose wrapped stream has compression kernels.
type compressorStream struct{ *stream }

func (s *compressorStream) comp() backend.Compressor { return s.inner().(backend.Compressor) }

func (s *compressorStream) Pack(f backend.WireFormat, dst, src backend.Region) error {
	skip, err := s.record("pack")
	if err != nil {
		return err
	}
	dst, src = s.unwrap(dst), s.unwrap(src)
	if skip {
		return nil
	}
	return s.comp().Pack(f, dst, src)
}

func (s *compressorStream) Unpack(f backend.WireFormat, dst, src backend.Region) error {
	skip, err := s.record("unpack")
	if err != nil {
		return err
	}
	dst, src = s.unwrap(dst), s.unwrap(src)
	if skip {
		return nil
	}
	return s.comp().Unpack(f, dst, src)
}

func (s *compressorStream) TopK(dt backend.DType, src backend.Region, k int, idx, val backend.Region) error {
	skip, err := s.record("topk")
	if err != nil {
		return err
	}
	src, idx, val = s.unwrap(src), s.unwrap(idx), s.unwrap(val)
	if skip {
		return nil
	}
	return s.comp().TopK(dt, src, k, idx, val)
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Device     = (*device)(nil)
	_ backend.Importer   = (*importerDevice)(nil)
	_ backend.Compressor = (*compressorStream)(nil)
)
