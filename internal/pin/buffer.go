package pin

import "github.com/gocoll/gocoll/internal/memory"

// Buffer is the memory of one HostBuffer: its pinned Mem, and the calls
// (running or queued) that resolved it (Own). Every Buffer is in the
// process's set of pinned memory (Lookup, Find) from New until its memory
// is retired; the ranges of retired ones stay recorded there.
type Buffer struct {
	*Mem
	Own memory.Owner
}

// buffers is every Buffer's memory, and the ranges of closed ones.
var buffers memory.Registry[*Buffer]

// New allocates a Buffer of n bytes, zeroed, and adds it to the set.
func New(n int) (*Buffer, error) {
	m, err := Alloc(n)
	if err != nil {
		return nil, err
	}
	b := &Buffer{Mem: m}
	buffers.Add(b)
	return b, nil
}

// Lookup returns the Buffer that holds p entirely, or nil.
func Lookup(p []byte) *Buffer {
	b, _ := buffers.Lookup(p)
	return b
}

// Find is Lookup that also reports whether p lies in the range of a closed
// Buffer (memory.Registry.Find).
func Find(p []byte) (b *Buffer, ok, closed bool) { return buffers.Find(p) }

// Buffers returns the number of Buffers in the set (tests).
func Buffers() int { return buffers.Len() }

// Close closes b once (first: this call did): it marks b closed, so a call
// resolving it from then on is refused, waits for the calls using it, and
// closes every rank's import of it. Unless leak (a device that imported it
// may still write it: the memory is never freed, and b stays in the set,
// closed), the memory is then retired and b leaves the set: one snapshot
// drops b and records its range, so a call finds either, never neither.
func (b *Buffer) Close() (first, leak bool, err error) {
	if !b.Own.Close() {
		return false, false, nil
	}
	b.Own.Wait()
	leak, err = b.CloseImports()
	if leak {
		return true, true, err
	}
	if rerr := b.Release(func(retired []byte) { buffers.Remove(b, retired) }); rerr != nil && err == nil {
		err = rerr
	}
	return true, false, err
}
