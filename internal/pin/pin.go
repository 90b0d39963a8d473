// Package pin keeps the pinned host memory of HostBuffers (Buffer: the
// process's set of them, the calls using each, its closing) and each
// device's import of it: a rank imports a buffer once, the first time a
// call hands it over, reuses the import on later calls, and the import is
// closed when the buffer or the rank is, or leaked when its device was
// declared lost (that device may still write the pages).
package pin

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Mem is one buffer of pinned host memory and the ranks that imported it.
type Mem struct {
	mem       []byte
	base, end uintptr
	mu        sync.Mutex
	imports   []rankImport
}

type rankImport struct {
	r   *Rank
	buf backend.Buffer
}

// Alloc allocates n bytes of pinned host memory, zeroed.
func Alloc(n int) (*Mem, error) {
	mem, err := backend.AllocHostMemory(n)
	if err != nil {
		return nil, err
	}
	m := &Mem{mem: mem, base: uintptr(unsafe.Pointer(unsafe.SliceData(mem)))}
	m.end = m.base + uintptr(len(mem))
	return m, nil
}

// Bytes is m's memory.
func (m *Mem) Bytes() []byte { return m.mem }

// Bounds is m's address range (memory.Entry).
func (m *Mem) Bounds() (base, end uintptr) { return m.base, m.end }

// CloseImports closes every rank's import of m. leak reports that a device
// may still use the memory, which must then never be freed: a device that
// imported it was declared lost, or its import failed to close with
// backend.ErrDeviceLost. err is the first other failure to close an import.
func (m *Mem) CloseImports() (leak bool, err error) {
	m.mu.Lock()
	imps := m.imports
	m.imports = nil
	m.mu.Unlock()
	for _, imp := range imps {
		imp.r.forget(m)
		if imp.r.lost() {
			leak = true
			continue
		}
		if cerr := imp.buf.Close(); cerr != nil {
			if errors.Is(cerr, backend.ErrDeviceLost) {
				leak = true
			} else if err == nil {
				err = cerr
			}
		}
	}
	return leak, err
}

// Release gives m's memory back once its imports are closed: retired when
// the platform can (its addresses stay reserved, so a stale slice of it is
// never another mapping's memory), else freed. unregister is called with
// the retired memory (nil when freed) before the memory is freed: the
// caller's record of m goes first.
func (m *Mem) Release(unregister func(retired []byte)) error {
	if err := backend.RetireHostMemory(m.mem); err == nil {
		unregister(m.mem)
		return nil
	}
	unregister(nil)
	return backend.FreeHostMemory(m.mem)
}

// Rank is one rank's imports of pinned memory.
type Rank struct {
	imp      backend.Importer // nil: the device imports nothing
	lost     func() bool
	mu       sync.Mutex
	imported []imported
}

type imported struct {
	m   *Mem
	buf backend.Buffer
}

// NewRank returns the imports of a rank on dev; lost reports that dev was
// declared lost.
func NewRank(dev backend.Device, lost func() bool) *Rank {
	r := &Rank{lost: lost}
	r.imp, _ = dev.(backend.Importer)
	return r
}

// Region returns b, which lies in m, as a region of the rank's import of m,
// importing m on first use; ok is false when the device imports nothing,
// and err says why an import failed (the caller stages b instead, or
// fails).
func (r *Rank) Region(m *Mem, b []byte) (reg backend.Region, ok bool, err error) {
	if r.imp == nil {
		return backend.Region{}, false, nil
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - m.base)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.imported {
		if x.m == m {
			return backend.Region{Buf: x.buf, Off: off, Len: len(b)}, true, nil
		}
	}
	buf, err := r.imp.Import(m.mem)
	if err != nil {
		return backend.Region{}, false, err
	}
	m.mu.Lock()
	m.imports = append(m.imports, rankImport{r: r, buf: buf})
	m.mu.Unlock()
	r.imported = append(r.imported, imported{m: m, buf: buf})
	return backend.Region{Buf: buf, Off: off, Len: len(b)}, true, nil
}

// forget drops m, whose imports are being closed, from the rank's.
func (r *Rank) forget(m *Mem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.imported {
		if x.m == m {
			r.imported = append(r.imported[:i], r.imported[i+1:]...)
			return
		}
	}
}

// Close closes the rank's imports (its group's Close).
func (r *Rank) Close() {
	r.mu.Lock()
	imps := r.imported
	r.imported = nil
	r.mu.Unlock()
	for _, x := range imps {
		x.m.mu.Lock()
		for i, p := range x.m.imports {
			if p.r == r {
				x.m.imports = append(x.m.imports[:i], x.m.imports[i+1:]...)
				break
			}
		}
		x.m.mu.Unlock()
		x.buf.Close()
	}
}
