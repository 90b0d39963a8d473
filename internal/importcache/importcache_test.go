package importcache

import (
	"golang.org/x/sys/unix"
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"github.com/google/go-cmp/cmp"
)

// GOCOLL_IMPORT_CACHE's sizes.
func TestParseBytes(t *testing.T) {
	type result struct {
		In string
		N  int64
		OK bool
	}
	var got, want []result
	for _, tc := range []result{
		{"0", 0, true}, {"off", 0, true}, {"12345", 12345, true}, {"64M", 64 << 20, true}, {"64MiB", 64 << 20, true},
		{"2g", 2 << 30, true}, {" 8 KiB", 0, false}, {"8k", 8 << 10, true}, {"-1", 0, false}, {"lots", 0, false}, {"", 0, false},
	} {
		n, ok := parseBytes(tc.In)
		got, want = append(got, result{tc.In, n, ok}), append(want, tc)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("parseBytes (-want +got):\n%s", d)
	}
}

// InGoHeap takes heap objects, interior pointers included, and refuses
// mmap memory and globals.
func TestInGoHeap(t *testing.T) {
	mm, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Munmap(mm)
	if InGoHeap(unsafe.Pointer(&mm[0])) || InGoHeap(unsafe.Pointer(&global[0])) {
		t.Fatal("InGoHeap accepted mmap memory or a global")
	}
	if x := make([]byte, 1<<20); !InGoHeap(unsafe.Pointer(&x[12345])) {
		t.Fatal("InGoHeap refused an interior pointer of a heap object")
	}
}

var global [64 << 10]byte

// The sightings are bounded: the dead ones go first, then the oldest, and
// they keep nothing alive.
func TestSightingsBounded(t *testing.T) {
	cache.mu.Lock()
	saved := cache.seen
	cache.seen = nil
	cache.mu.Unlock()
	defer func() {
		cache.mu.Lock()
		cache.seen = saved
		cache.mu.Unlock()
	}()
	objs := make([]*[64]byte, maxSightings+8)
	sight := func(i int) {
		objs[i] = new([64]byte)
		p := unsafe.Pointer(objs[i])
		cache.mu.Lock()
		sightLocked(uintptr(p), uintptr(p)+64, p)
		cache.mu.Unlock()
	}
	sighted := func(i int) bool {
		p := uintptr(unsafe.Pointer(objs[i]))
		cache.mu.RLock()
		defer cache.mu.RUnlock()
		return sightedLocked(p, p+1)
	}
	for i := 0; i < maxSightings+4; i++ {
		sight(i)
	}
	if n := len(cache.seen); n > maxSightings {
		t.Fatalf("%d sightings, bound %d", n, maxSightings)
	}
	if sighted(0) || !sighted(4) || !sighted(maxSightings+3) {
		t.Fatalf("the oldest sightings were not the ones dropped: 0 %v, 4 %v, last %v", sighted(0), sighted(4), sighted(maxSightings+3))
	}
	w := weak.Make(objs[10])
	for i := 10; i < 20; i++ {
		objs[i] = nil
	}
	runtime.GC()
	runtime.GC()
	if w.Value() != nil {
		t.Fatal("a sighting kept its object alive")
	}
	for i := maxSightings + 4; i < maxSightings+8; i++ {
		sight(i)
	}
	if !sighted(20) {
		t.Error("a live sighting was dropped while dead ones were there")
	}
	cache.mu.RLock()
	n := len(cache.seen)
	cache.mu.RUnlock()
	if n > maxSightings {
		t.Fatalf("%d sightings, bound %d", n, maxSightings)
	}
}
