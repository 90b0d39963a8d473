package importcache

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinBytes is the smallest slice imported: below it the staging copy is
// cheaper than pinning pages, and small objects share pages.
const MinBytes = 4 << 20

// DefaultBudget is the process's import budget unless SetBudget or
// GOCOLL_IMPORT_CACHE sets another.
const DefaultBudget = 4 << 30

// SetBudget sets the process's budget for imported slices, in bytes, and
// returns the previous one; a negative n restores the default
// (GOCOLL_IMPORT_CACHE if set, else DefaultBudget). Imports over a lowered
// budget that no call is using are closed before it returns, the others
// once their calls end.
func SetBudget(n int64) int64 {
	Budget() // the environment's value is read first
	if n < 0 {
		n = envBudget()
	}
	prev := budget.n.Swap(n)
	trim()
	return prev
}

// Budget returns the process's budget.
func Budget() int64 {
	budget.once.Do(func() { budget.n.Store(envBudget()) })
	return budget.n.Load()
}

// Bytes reports the bytes of slices imported by devices in this process:
// the imports kept for later calls, those of slices the collector freed
// that are not closed yet, and those of a device declared lost.
func Bytes() int64 {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	return cache.liveBytes + cache.dyingBytes + cache.leakedBytes
}

var budget struct {
	once sync.Once
	n    atomic.Int64
}

// envBudget is GOCOLL_IMPORT_CACHE's budget, or the default when it is
// unset or not a size.
func envBudget() int64 {
	if n, ok := parseBytes(os.Getenv("GOCOLL_IMPORT_CACHE")); ok {
		return n
	}
	return DefaultBudget
}

// parseBytes parses a size: bytes, or a number with a K, M or G suffix
// (optionally KiB, MiB, GiB; binary units); "off" is 0.
func parseBytes(s string) (int64, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "off" {
		return 0, true
	}
	shift := 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"kib", 10}, {"mib", 20}, {"gib", 30}, {"k", 10}, {"m", 20}, {"g", 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, false
	}
	return n << shift, true
}

// InGoHeap reports whether p points into a Go heap object: memory the Go
// runtime owns, never unmapped while the object is reachable. AddCleanup
// panics for memory outside the Go heap, and gives a no-op Cleanup for Go
// globals (left out: their rounding could leave the section).
func InGoHeap(p unsafe.Pointer) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	cl := runtime.AddCleanup((*byte)(p), noCleanup, 0)
	if cl == (runtime.Cleanup{}) {
		return false
	}
	cl.Stop()
	return true
}

func noCleanup(int) {}

// pageSpan is the n bytes at address p as a slice: the pages of a Go
// object, which may run past the object's last byte into the unused tail of
// its span (a span's pages are the span's alone). Built by hand: unsafe.Slice
// and pointer arithmetic under checkptr refuse a range past the object. The
// object is reachable (a call holds it) while the slice exists.
func pageSpan(p uintptr, n int) []byte {
	var b []byte
	h := (*struct {
		data     uintptr
		len, cap int
	})(unsafe.Pointer(&b))
	h.data, h.len, h.cap = p, n, n
	return b
}
