// Package backend defines the seam between gocoll's collective algorithms and
// the compute APIs that run them: a Device with buffers, a Stream that records
// copies and reduction kernels, and a Fence that waits for submitted work.
//
// Algorithms in package collective are written once against these interfaces;
// the Vulkan, Metal and pure-Go host backends implement them. This package has
// no cgo and no build tags, so every backend and the algorithms can import it
// without cycles.
package backend

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// DType is the element type of a reduction.
type DType int

const (
	F32      DType = iota // IEEE 754 binary32
	F64                   // IEEE 754 binary64
	I32                   // int32, two's complement, wrapping arithmetic
	U32                   // uint32, wrapping arithmetic
	I64                   // int64, two's complement, wrapping arithmetic
	U64                   // uint64, wrapping arithmetic
	I8                    // int8, two's complement, wrapping arithmetic
	U8                    // uint8, wrapping arithmetic
	Half                  // IEEE 754 binary16, reduced in float32
	BFloat16              // bfloat16 (the top half of a binary32), reduced in float32
	I16                   // int16, two's complement, wrapping arithmetic
	U16                   // uint16, wrapping arithmetic
	F8E4M3                // OCP fp8 E4M3 (FN: no infinities, max 448), reduced in float32
	F8E5M2                // OCP fp8 E5M2 (IEEE-like, max 57344), reduced in float32
)

// NumDTypes is the number of element types.
const NumDTypes = 14

// Valid reports whether d is one of the element types.
func (d DType) Valid() bool { return d >= F32 && d < NumDTypes }

// Size returns the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case I8, U8, F8E4M3, F8E5M2:
		return 1
	case Half, BFloat16, I16, U16:
		return 2
	}
	return 4
}

// IsInt reports whether d is an integer type.
func (d DType) IsInt() bool { return (d >= I32 && d <= U8) || d == I16 || d == U16 }

// Is16 reports whether d is a 16-bit floating-point type (Half, BFloat16).
func (d DType) Is16() bool { return d == Half || d == BFloat16 }

// Is8 reports whether d is an 8-bit floating-point type (F8E4M3, F8E5M2).
func (d DType) Is8() bool { return d == F8E4M3 || d == F8E5M2 }

// IsNarrowFloat reports whether d is a floating-point type held as bits and
// reduced in float32, rounded once per reduction (Half, BFloat16, F8E4M3,
// F8E5M2).
func (d DType) IsNarrowFloat() bool { return d.Is16() || d.Is8() }

// Signed reports whether d is a signed integer type.
func (d DType) Signed() bool { return d == I32 || d == I64 || d == I8 || d == I16 }

// Bit returns d's bit in a DTypeSet.
func (d DType) Bit() DTypeSet { return 1 << uint(d) }

// String returns the nccl-tests name of the type (int16 and uint16, which
// nccl-tests lacks, by their Go names; the fp8 types f8e4m3 and f8e5m2).
func (d DType) String() string {
	switch d {
	case F32:
		return "float"
	case F64:
		return "double"
	case I32:
		return "int32"
	case U32:
		return "uint32"
	case I64:
		return "int64"
	case U64:
		return "uint64"
	case I8:
		return "int8"
	case U8:
		return "uint8"
	case Half:
		return "half"
	case BFloat16:
		return "bfloat16"
	case I16:
		return "int16"
	case U16:
		return "uint16"
	case F8E4M3:
		return "f8e4m3"
	case F8E5M2:
		return "f8e5m2"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// DTypeSet is a set of element types (bit d for DType d).
type DTypeSet uint32

// Has reports whether d is in the set.
func (s DTypeSet) Has(d DType) bool { return d.Valid() && s&d.Bit() != 0 }

// AllDTypes holds every element type.
const AllDTypes DTypeSet = 1<<NumDTypes - 1

// Op is an element-wise reduction operator as the kernels implement it. Mean
// is not an Op here: collectives express it as Sum with a final scale of 1/N,
// which backends apply as a correctly rounded division by N (Divisor).
//
// The bitwise and logical operators (BAnd through LXor, MPI's MPI_BAND to
// MPI_LXOR) are defined on the integer types only (Defined); a backend
// refuses them on a floating-point type with ErrInvalidArgument. BAnd, BOr
// and BXor act on the bits, two's complement for the signed types. LAnd, LOr
// and LXor give 1 where (a != 0) op (b != 0) holds, else 0: every result of
// two or more sources is 0 or 1, and a reduction of one source copies it, as
// every operator does.
type Op int

const (
	Sum  Op = iota // a + b (IEEE; NaN and Inf propagate)
	Prod           // a * b
	Max            // maximum; NaN if either input is NaN (IEEE 754-2019 maximum)
	Min            // minimum; NaN if either input is NaN (IEEE 754-2019 minimum)
	BAnd           // a & b (integers only)
	BOr            // a | b (integers only)
	BXor           // a ^ b (integers only)
	LAnd           // 1 if a != 0 and b != 0, else 0 (integers only)
	LOr            // 1 if a != 0 or b != 0, else 0 (integers only)
	LXor           // 1 if exactly one of a and b is nonzero, else 0 (integers only)
)

// NumOps is the number of kernel operators.
const NumOps = 10

// Valid reports whether o is one of the operators.
func (o Op) Valid() bool { return o >= Sum && o < NumOps }

// IntOnly reports whether o is defined on the integer types only (the
// bitwise and logical operators).
func (o Op) IntOnly() bool { return o >= BAnd && o < NumOps }

// Defined reports whether o is an operator defined on element type d: every
// operator on the integer types, Sum, Prod, Max and Min on every type.
func (o Op) Defined(d DType) bool {
	return o.Valid() && d.Valid() && (!o.IntOnly() || d.IsInt())
}

// CheckOp returns nil where op is defined on dt, else an error wrapping
// ErrInvalidArgument that names both; backends call it before recording a
// reduction.
func CheckOp(op Op, dt DType) error {
	switch {
	case !op.Valid():
		return fmt.Errorf("unknown op %d: %w", int(op), ErrInvalidArgument)
	case !op.Defined(dt):
		return fmt.Errorf("op %v is not defined for element type %v (integer types only): %w", op, dt, ErrInvalidArgument)
	}
	return nil
}

var opNames = [NumOps]string{"sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor", "lxor"}

func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Memory says where a buffer lives.
type Memory int

const (
	// DeviceLocal memory is fastest for kernels and not mapped on the host.
	DeviceLocal Memory = iota
	// HostVisible memory is mapped into the process (pinned, coherent): the
	// host reads and writes it through Buffer.Bytes, and kernels can read and
	// write it directly.
	HostVisible
)

func (m Memory) String() string {
	if m == HostVisible {
		return "host-visible"
	}
	return "device-local"
}

// Heap is one memory heap of a device.
type Heap struct {
	Size        uint64
	DeviceLocal bool
}

// DeviceInfo describes a device as a backend sees it.
type DeviceInfo struct {
	Backend       string // "vulkan", "metal", "host"
	Index         int    // index among the backend's devices
	Name          string
	VendorID      uint32
	DeviceID      uint32
	Type          string // "discrete", "integrated", "virtual", "cpu", "other"
	Driver        string // driver name and version as the API reports them
	APIVersion    string
	Float64       bool // the device reduces f64 in f64 kernels
	Float64Reason string
	// DenormPreserveFloat16, 32 and 64 report whether a kernel that asks
	// (the SPIR-V execution mode DenormPreserve, which every gocoll kernel
	// with float arithmetic declares where the device takes it) keeps
	// subnormals of that width instead of flushing them to zero: the
	// device's shaderDenormPreserveFloat16/32/64 (Vulkan 1.2 float
	// controls, or VK_KHR_shader_float_controls) where its
	// denormBehaviorIndependence lets a kernel ask for that width alone;
	// false where the device reports none, on Metal, and on the host
	// backend, which needs no kernels. Where DenormPreserveFloat32 is false
	// the float32 kernels may flush, and the device's first open in the
	// process tests them (Float32Hardware); float64 kernels rely on the
	// device's arithmetic.
	DenormPreserveFloat16 bool
	DenormPreserveFloat32 bool
	DenormPreserveFloat64 bool
	// Float32Hardware reports whether the float32 reductions and scales run
	// kernels that use the device's float32 arithmetic (true) or kernels
	// that compute on the values' bits (the _ftz kernels: exact whatever the
	// device does with subnormals, as the float16 and bfloat16 kernels
	// always are, and slower), so the results are the same bits either way;
	// Float32Reason says why. A device that reports DenormPreserveFloat32
	// runs the hardware kernels. One that does not runs them only where a
	// self-test at its first open in the process (the hardware kernels on
	// subnormal inputs and results, in many work groups, every op and
	// float32 kernel kind, bit for bit against the host's arithmetic) found them
	// exact; a mismatch or a self-test that cannot run selects the _ftz
	// kernels. In a listing (Backend.Devices) of a device not yet opened in
	// the process Float32Reason is empty: the choice is not made yet. The
	// host backend reduces in Go, which keeps subnormals: true.
	Float32Hardware bool
	Float32Reason   string
	// Kernels is the set of element types the device's Reduce and Scale
	// take (F32 always; F64 when Float64). Collectives of a type outside
	// it take an exact host path where one exists, else ErrUnsupported.
	Kernels DTypeSet
	// MaxBindingBytes is the largest range one kernel binding may cover
	// (Vulkan maxStorageBufferRange, possibly lowered by a test hook). Larger
	// regions are split across dispatches by the backend.
	MaxBindingBytes  int64
	MaxAllocBytes    int64
	SubgroupSize     int
	TimestampPeriod  float64 // nanoseconds per timestamp tick
	HostImport       bool    // VK_EXT_external_memory_host or equivalent
	Heaps            []Heap
	UnifiedMemory    bool // device memory is host memory (CPU drivers, Apple silicon)
	MaxWorkGroupSize int
}

// KernelTypes returns the element types the device reduces in kernels:
// Kernels, plus F32; for a backend that leaves Kernels empty, F32, and F64
// when Float64.
func (inf DeviceInfo) KernelTypes() DTypeSet {
	if inf.Kernels != 0 {
		return inf.Kernels | F32.Bit()
	}
	s := F32.Bit()
	if inf.Float64 {
		s |= F64.Bit()
	}
	return s
}

// Region is a byte range of a buffer: [Off, Off+Len).
type Region struct {
	Buf Buffer
	Off int
	Len int
}

// Device is one rank's view of a device: a logical device with its own
// queue(s). Several Devices may be opened on one physical device; each then
// has its own queue, so data really crosses between them.
type Device interface {
	Info() DeviceInfo
	// Alloc returns a buffer of at least bytes bytes. bytes may be 0.
	Alloc(bytes int, where Memory) (Buffer, error)
	// Stream returns the device's command stream. A Device has one stream,
	// used by one goroutine at a time.
	Stream() Stream
	// Counters returns the device's counters at the backend seam.
	Counters() *Counters
	// Close waits for the device to go idle and frees everything it owns.
	// It is idempotent.
	Close() error
}

// Buffer is memory on a device.
type Buffer interface {
	Len() int
	Memory() Memory
	// Bytes returns the host mapping of a HostVisible buffer (nil for
	// DeviceLocal). It stays valid until Close; the caller must not use it
	// while submitted work writes the same bytes.
	Bytes() []byte
	// Write copies p into the buffer at off (staged for DeviceLocal memory;
	// it waits for the copy).
	Write(off int, p []byte) error
	// Read copies the buffer at off into p (staged for DeviceLocal memory).
	Read(off int, p []byte) error
	Close() error
}

// Stream records work and submits it. Recorded work runs in order. Nothing
// runs before Submit.
type Stream interface {
	// Copy records dst = src. The regions have equal lengths; they may be in
	// any memory of this device but must not overlap.
	Copy(dst, src Region) error
	// Reduce records dst[i] = op(srcs[0][i], srcs[1][i], ...) * scale for
	// every element, reduced in the order of srcs. scale is applied only when
	// it is not 1; a scale of exactly 1/N (Divisor) divides by N, correctly
	// rounded. dst may be one of srcs (the same region), never a partial
	// overlap. All regions hold the same number of elements of dt.
	Reduce(op Op, dt DType, dst Region, srcs []Region, scale float64) error
	// Scale records dst[i] = src[i] * scale (a copy when scale is 1; a
	// correctly rounded division by N when scale is 1/N, as in Reduce) with a
	// kernel. dst and src may be the same region.
	Scale(dt DType, dst, src Region, scale float64) error
	// Submit sends what was recorded since the last Submit and returns a fence
	// that signals when it is done. It does not wait. Submitting nothing
	// returns a fence that is already signalled.
	Submit() (Fence, error)
}

// Fence signals the end of a submission.
//
// Backends hand out fences from a fixed ring so that Submit allocates
// nothing (host: 256, Vulkan and Metal: 1024). A Fence therefore stands for its
// submission for at least 256 later submissions of the stream; after that
// it stands for a later one, so Wait may wait longer but never returns nil
// before the submission it was returned for has run.
type Fence interface {
	// Wait blocks until the work is done, ctx ends (returning ctx.Err()), or
	// the work fails. Waiting again after success returns nil at once.
	Wait(ctx context.Context) error
}

// Counters are counted at the backend seam, so tests can check what an
// algorithm really did without trusting the algorithm's own bookkeeping.
type Counters struct {
	Dispatches     atomic.Int64 // kernel dispatches recorded
	Copies         atomic.Int64 // copy commands recorded
	Submits        atomic.Int64 // queue submissions
	BytesReduced   atomic.Int64 // bytes written by reduction kernels
	BytesCopied    atomic.Int64 // bytes moved by Copy
	BytesWritten   atomic.Int64 // bytes moved from Go memory into buffers by Buffer.Write
	BytesRead      atomic.Int64 // bytes moved from buffers into Go memory by Buffer.Read
	Allocs         atomic.Int64 // buffers allocated
	ObjectsCreated atomic.Int64 // API objects created (pipelines, buffers, memory, fences, command buffers)
	// BytesFromHost and BytesToHost count what recorded commands (copies
	// and kernels) read from and write to HostVisible memory: on a discrete
	// GPU, the bytes that cross PCIe in each direction.
	BytesFromHost atomic.Int64
	BytesToHost   atomic.Int64
	// Replays counts submissions sent without recording: a repeated
	// one-dispatch submission resubmitted from a command buffer recorded
	// once (Vulkan). Submits counts them too.
	Replays atomic.Int64
}

// CountHost adds the host traffic of one command writing dst from srcs.
func (c *Counters) CountHost(dst Region, srcs ...Region) {
	for _, r := range srcs {
		if r.Buf != nil && r.Buf.Memory() == HostVisible {
			c.BytesFromHost.Add(int64(r.Len))
		}
	}
	if dst.Buf != nil && dst.Buf.Memory() == HostVisible {
		c.BytesToHost.Add(int64(dst.Len))
	}
}

// CounterSnapshot is a plain copy of Counters.
type CounterSnapshot struct {
	Dispatches, Copies, Submits                        int64
	BytesReduced, BytesCopied, BytesWritten, BytesRead int64
	Allocs, ObjectsCreated                             int64
	BytesFromHost, BytesToHost                         int64
	Replays                                            int64
}

// Snapshot reads every counter.
func (c *Counters) Snapshot() CounterSnapshot {
	return CounterSnapshot{
		Dispatches: c.Dispatches.Load(), Copies: c.Copies.Load(), Submits: c.Submits.Load(),
		BytesReduced: c.BytesReduced.Load(), BytesCopied: c.BytesCopied.Load(),
		BytesWritten: c.BytesWritten.Load(), BytesRead: c.BytesRead.Load(),
		Allocs: c.Allocs.Load(), ObjectsCreated: c.ObjectsCreated.Load(),
		BytesFromHost: c.BytesFromHost.Load(), BytesToHost: c.BytesToHost.Load(),
		Replays: c.Replays.Load(),
	}
}

// Sub returns s - o, field by field.
func (s CounterSnapshot) Sub(o CounterSnapshot) CounterSnapshot {
	return CounterSnapshot{
		Dispatches: s.Dispatches - o.Dispatches, Copies: s.Copies - o.Copies, Submits: s.Submits - o.Submits,
		BytesReduced: s.BytesReduced - o.BytesReduced, BytesCopied: s.BytesCopied - o.BytesCopied,
		BytesWritten: s.BytesWritten - o.BytesWritten, BytesRead: s.BytesRead - o.BytesRead,
		Allocs: s.Allocs - o.Allocs, ObjectsCreated: s.ObjectsCreated - o.ObjectsCreated,
		BytesFromHost: s.BytesFromHost - o.BytesFromHost, BytesToHost: s.BytesToHost - o.BytesToHost,
		Replays: s.Replays - o.Replays,
	}
}

// OpenOptions are per-device settings, mostly test hooks.
type OpenOptions struct {
	// MaxBindingBytes, when > 0, lowers the largest range one kernel binding
	// covers below the device's own limit, so tests exercise splitting.
	MaxBindingBytes int64
	// MaxWorkGroups, when > 0, lowers the number of work groups one kernel
	// dispatch uses below the device's own limit, so that each invocation
	// loops over many elements and tests exercise the kernels' loops (the
	// _ftz float32 sum taking its fast and exact paths in one invocation).
	// Backends without kernels ignore it.
	MaxWorkGroups uint32
	// DisableFloat64 makes the device report no f64 support, so the exact
	// host path for f64 runs.
	DisableFloat64 bool
	// Validation turns on the API's validation layer where there is one; a
	// validation message then fails the call that caused it.
	Validation bool
	// ShareDevice makes the devices of one process opened on the same
	// physical device share one logical device (one GPU context) instead of
	// each creating its own, so the GPU need not switch contexts between
	// them. Each device keeps its own queue where the hardware has enough
	// (else devices share a queue, submissions serialized), and its own
	// command buffers, fences, buffers, counters and close; data still
	// crosses between devices as with separate logical devices. Backends
	// without logical devices (host, Metal) ignore it.
	ShareDevice bool
	// ShareKey: only devices opened with ShareDevice and the same key share a
	// logical device (a Group gives its ranks a key of their own, so a
	// device lost in one group leaves the others alone).
	ShareKey uint64
	// DrainLimit bounds the device's waits for its own work that no ctx
	// bounds (Close, freeing memory that submitted work still uses, waiting
	// for a free submission slot); 0 means 10 s. A device whose work does not
	// complete within it is declared lost: its errors wrap ErrDeviceLost and
	// the memory its work may still use is leaked, never freed or unmapped
	// under it. Tests lower it. Backends without such waits (host) ignore it.
	DrainLimit time.Duration
}

// Backend opens devices of one compute API.
type Backend interface {
	Name() string
	// Priority orders the automatic choice of a backend (a Group given no
	// backend name): the available backends are tried from the highest
	// priority down (ties by name), and a negative priority is never chosen
	// automatically, only by name. gocoll's: metal 30, vulkan 20, host 0.
	Priority() int
	// Available returns nil when the backend can open devices, else why not
	// (an error wrapping ErrUnavailable).
	Available() error
	// Devices lists the devices the backend can open.
	Devices() ([]DeviceInfo, error)
	// Open opens device index as a new logical device.
	Open(index int, opts OpenOptions) (Device, error)
}

// Errors shared by backends. Backend errors wrap one of these so callers can
// use errors.Is without knowing the backend.
var (
	ErrUnavailable     = errors.New("backend unavailable")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrOutOfMemory     = errors.New("out of memory")
	ErrDeviceLost      = errors.New("device lost")
	ErrUnsupported     = errors.New("unsupported")
	ErrTimeout         = errors.New("timeout")
	ErrClosed          = errors.New("closed")
	ErrValidation      = errors.New("validation layer message")
	// ErrTransportLost: a transport between processes whose native
	// collective still held memory past the drain limit (see
	// NativeCollectives.Drain); MPI may still read or write that memory.
	ErrTransportLost = errors.New("transport lost")
)

// Priorities of gocoll's backends (Backend.Priority).
const (
	PriorityMetal  = 30
	PriorityVulkan = 20
	PriorityHost   = 0
)

// omission is a backend left out of this build.
type omission struct {
	why      string
	priority int
}

var (
	regMu    sync.Mutex
	registry = map[string]Backend{}
	omitted  = map[string]omission{}
)

// Register makes a backend selectable by name, and by the automatic choice
// when its Priority is not negative. Backends call it from init.
func Register(b Backend) {
	regMu.Lock()
	defer regMu.Unlock()
	registry[b.Name()] = b
}

// RegisterOmitted records that a backend was left out of this build and why
// (for example the build tag that leaves it out), so selection can say so:
// priority is the Priority it would have had here (negative where it could
// not run on this system at all: the automatic choice does not mention it).
func RegisterOmitted(name, why string, priority int) {
	regMu.Lock()
	defer regMu.Unlock()
	omitted[name] = omission{why, priority}
}

// Lookup returns the backend registered under name, or an error wrapping
// ErrUnavailable that says why it is not in this build.
func Lookup(name string) (Backend, error) {
	regMu.Lock()
	defer regMu.Unlock()
	if b, ok := registry[name]; ok {
		return b, nil
	}
	if o, ok := omitted[name]; ok {
		return nil, fmt.Errorf("backend %q: %s: %w", name, o.why, ErrUnavailable)
	}
	return nil, fmt.Errorf("backend %q is not known: %w", name, ErrUnavailable)
}

// Names lists the registered backends, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Known lists every backend this build knows of, registered or left out
// (RegisterOmitted), by priority from the highest down, ties by name.
func Known() []string { return byPriority(true) }

// Preference lists the backends the automatic choice tries, in its order:
// those registered or left out with a priority of 0 or more, from the
// highest priority down, ties by name. (Lookup says why one left out is
// unavailable.)
func Preference() []string { return byPriority(false) }

func byPriority(all bool) []string {
	regMu.Lock()
	type entry struct {
		name string
		prio int
	}
	var es []entry
	for n, b := range registry {
		es = append(es, entry{n, b.Priority()})
	}
	for n, o := range omitted {
		if _, ok := registry[n]; !ok {
			es = append(es, entry{n, o.priority})
		}
	}
	regMu.Unlock()
	sort.Slice(es, func(i, j int) bool {
		if es[i].prio != es[j].prio {
			return es[i].prio > es[j].prio
		}
		return es[i].name < es[j].name
	})
	out := make([]string, 0, len(es))
	for _, e := range es {
		if all || e.prio >= 0 {
			out = append(out, e.name)
		}
	}
	return out
}

// CheckRegion reports whether r lies inside its buffer.
func CheckRegion(r Region) error {
	if r.Buf == nil {
		return fmt.Errorf("region has no buffer: %w", ErrInvalidArgument)
	}
	if r.Off < 0 || r.Len < 0 || r.Off+r.Len > r.Buf.Len() {
		return fmt.Errorf("region [%d, %d) outside buffer of %d bytes: %w", r.Off, r.Off+r.Len, r.Buf.Len(), ErrInvalidArgument)
	}
	return nil
}

// MemorySharer is implemented by devices whose commands can use the buffers
// of some other devices: SharesMemory(o) reports whether regions of o's
// buffers may appear in this device's Stream commands (ranks opened on one
// shared logical device; every device of the host backend). The caller
// orders the devices' work (a device's writes are complete, as its fence
// says, before another device's command reads them).
type MemorySharer interface {
	SharesMemory(o Device) bool
}

// SharesMemory reports whether d's commands can use o's buffers.
func SharesMemory(d, o Device) bool {
	if d == o {
		return true
	}
	s, ok := d.(MemorySharer)
	return ok && s.SharesMemory(o)
}
