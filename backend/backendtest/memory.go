package backendtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

var memories = []backend.Memory{backend.DeviceLocal, backend.HostVisible}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := newRand(seed)
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// testAlloc checks buffers of size 0 and of odd sizes in both kinds of
// memory, and the allocation counters.
func (s *suite) testAlloc(t *testing.T) {
	for _, mem := range memories {
		for _, n := range []int{0, 1, 3, 7, 8, 4097, 65539} {
			t.Run(fmt.Sprintf("%v/%d", mem, n), func(t *testing.T) {
				before := s.dev.Counters().Snapshot()
				b, err := s.dev.Alloc(n, mem)
				if err != nil {
					t.Fatalf("Alloc(%d, %v): %v", n, mem, err)
				}
				delta := s.dev.Counters().Snapshot().Sub(before)
				if delta.Allocs != 1 || delta.ObjectsCreated < 1 {
					t.Errorf("Alloc: counted %d allocs and %d objects, want 1 and at least 1", delta.Allocs, delta.ObjectsCreated)
				}
				if b.Len() < n {
					t.Errorf("Len() = %d, want at least %d", b.Len(), n)
				}
				if b.Memory() != mem {
					t.Errorf("Memory() = %v, want %v", b.Memory(), mem)
				}
				if mem == backend.HostVisible && n > 0 && len(b.Bytes()) < n {
					t.Errorf("Bytes() has %d bytes, want at least %d", len(b.Bytes()), n)
				}
				must(t, b.Write(0, nil), "Write of nothing")
				must(t, b.Read(0, nil), "Read of nothing")
				if n > 0 {
					must(t, b.Write(0, []byte{0xa5}), "Write first byte")
					must(t, b.Write(n-1, []byte{0x5a}), "Write last byte")
					first, last := []byte{0}, []byte{0}
					must(t, b.Read(0, first), "Read first byte")
					must(t, b.Read(n-1, last), "Read last byte")
					if n > 1 && (first[0] != 0xa5 || last[0] != 0x5a) {
						t.Errorf("first and last bytes read back as %#x %#x, want 0xa5 0x5a", first[0], last[0])
					}
				}
				must(t, b.Close(), "Close")
				must(t, b.Close(), "second Close")
			})
		}
	}
}

// testWriteRead checks Write/Read round trips at assorted (odd) byte offsets
// and lengths, against a shadow copy, and their counters.
func (s *suite) testWriteRead(t *testing.T) {
	const size = 10007
	for _, mem := range memories {
		t.Run(mem.String(), func(t *testing.T) {
			b := alloc(t, s.dev, size, mem)
			shadow := randomBytes(1, size)
			before := s.dev.Counters().Snapshot()
			must(t, b.Write(0, shadow), "Write whole buffer")
			written := int64(size)
			for i, w := range []struct{ off, n int }{{1, 7}, {3, 4096}, {4093, 1}, {5000, 13}, {size - 1, 1}, {size, 0}, {0, 3}} {
				p := randomBytes(uint64(10+i), w.n)
				must(t, b.Write(w.off, p), fmt.Sprintf("Write(%d, %d bytes)", w.off, w.n))
				copy(shadow[w.off:], p)
				written += int64(w.n)
			}
			var read int64
			for _, r := range []struct{ off, n int }{{0, size}, {1, 7}, {2, 4097}, {4093, 3}, {size - 5, 5}, {size, 0}} {
				p := make([]byte, r.n)
				must(t, b.Read(r.off, p), fmt.Sprintf("Read(%d, %d bytes)", r.off, r.n))
				read += int64(r.n)
				if !bytes.Equal(p, shadow[r.off:r.off+r.n]) {
					t.Errorf("Read(%d, %d bytes) differs from what was written", r.off, r.n)
				}
			}
			delta := s.dev.Counters().Snapshot().Sub(before)
			if delta.BytesWritten != written || delta.BytesRead != read {
				t.Errorf("counted %d bytes written and %d read, want %d and %d", delta.BytesWritten, delta.BytesRead, written, read)
			}
		})
	}
}

// testBytes checks the host mapping: present for host-visible memory and
// coherent with Write, Read and kernels; absent for device-local memory.
func (s *suite) testBytes(t *testing.T) {
	const n = 1024 // f32 elements
	dl := alloc(t, s.dev, 4*n, backend.DeviceLocal)
	if p := dl.Bytes(); p != nil {
		t.Errorf("Bytes() of device-local memory is %d bytes, want nil", len(p))
	}
	src := alloc(t, s.dev, 4*n, backend.HostVisible)
	dst := alloc(t, s.dev, 4*n, backend.HostVisible)
	p := src.Bytes()
	if p == nil || len(p) < 4*n {
		t.Fatalf("Bytes() of host-visible memory has %d bytes, want %d", len(p), 4*n)
	}
	// Through the mapping, seen by Read.
	in := make([]float32, n)
	fillExact(newRand(3), in)
	copy(p, bytesOf(in))
	if got := readT[float32](t, src, 0, n); !bytes.Equal(bytesOf(got), bytesOf(in)) {
		t.Errorf("Read does not see what was stored through Bytes()")
	}
	// Through Write, seen in the mapping.
	patch := []byte{1, 2, 3, 4, 5}
	must(t, src.Write(4*n-5, patch), "Write")
	if !bytes.Equal(p[4*n-5:4*n], patch) {
		t.Errorf("Bytes() does not show what Write stored")
	}
	copy(p[4*n-5:], bytesOf(in[n-2:])[3:]) // restore
	// A kernel reads the mapping and writes another one.
	st := s.dev.Stream()
	whole := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: 4 * n} }
	must(t, st.Reduce(backend.Sum, backend.F32, whole(dst), []backend.Region{whole(src), whole(src)}, 1), "Reduce")
	submitWait(t, st)
	q := dst.Bytes()
	if q == nil {
		t.Fatalf("Bytes() of host-visible memory is nil")
	}
	got := make([]float32, n)
	copy(bytesOf(got), q)
	for i := range n {
		if got[i] != 2*in[i] {
			t.Fatalf("element %d in the destination's mapping: %v, want %v", i, got[i], 2*in[i])
		}
	}
}

// testCopy checks Copy between every pair of memory kinds, within one
// buffer, and one large copy, with the bytes around the destination intact.
func (s *suite) testCopy(t *testing.T) {
	const n, srcOff, dstOff, size = 4092, 4, 8, 4 * 1025
	st := s.dev.Stream()
	type copyCase struct {
		name     string
		src, dst backend.Buffer
		srcOff   int
		dstOff   int
		n        int
		want     []byte // the whole destination buffer after the copy
	}
	var cases []copyCase
	seed := uint64(100)
	for _, from := range memories {
		for _, to := range memories {
			src, dst := alloc(t, s.dev, size, from), alloc(t, s.dev, size, to)
			in, old := randomBytes(seed, size), randomBytes(seed+1, size)
			seed += 2
			must(t, src.Write(0, in), "Write")
			must(t, dst.Write(0, old), "Write")
			want := bytes.Clone(old)
			copy(want[dstOff:dstOff+n], in[srcOff:srcOff+n])
			cases = append(cases, copyCase{fmt.Sprintf("%v to %v", from, to), src, dst, srcOff, dstOff, n, want})
		}
	}
	// Within one buffer, non-overlapping halves.
	one := alloc(t, s.dev, size, backend.DeviceLocal)
	in := randomBytes(seed, size)
	must(t, one.Write(0, in), "Write")
	want := bytes.Clone(in)
	copy(want[2048:2048+2000], in[4:4+2000])
	cases = append(cases, copyCase{"within one buffer", one, one, 4, 2048, 2000, want})
	// Large.
	const big = 4<<20 + 4
	bs, bd := alloc(t, s.dev, big, backend.DeviceLocal), alloc(t, s.dev, big, backend.DeviceLocal)
	in = randomBytes(seed+1, big)
	must(t, bs.Write(0, in), "Write")
	cases = append(cases, copyCase{"4 MiB + 4", bs, bd, 0, 0, big, in})

	before := s.dev.Counters().Snapshot()
	var copied int64
	for _, c := range cases {
		must(t, st.Copy(backend.Region{Buf: c.dst, Off: c.dstOff, Len: c.n}, backend.Region{Buf: c.src, Off: c.srcOff, Len: c.n}), "Copy "+c.name)
		copied += int64(c.n)
	}
	submitWait(t, st)
	delta := s.dev.Counters().Snapshot().Sub(before)
	if delta.Copies != int64(len(cases)) || delta.BytesCopied != copied {
		t.Errorf("counted %d copies of %d bytes, want %d of %d", delta.Copies, delta.BytesCopied, len(cases), copied)
	}
	if delta.Submits != 1 {
		t.Errorf("counted %d submits, want 1", delta.Submits)
	}
	for _, c := range cases {
		got := make([]byte, len(c.want))
		must(t, c.dst.Read(0, got), "Read")
		if !bytes.Equal(got, c.want) {
			i := 0
			for got[i] == c.want[i] {
				i++
			}
			t.Errorf("Copy %s: destination differs first at byte %d (copied [%d, %d))", c.name, i, c.dstOff, c.dstOff+c.n)
		}
	}
}

// alternate returns device-local memory for even i and host-visible memory
// for odd i, so that the sources of one kernel come from both kinds.
func alternate(i int) backend.Memory {
	if i%2 == 1 {
		return backend.HostVisible
	}
	return backend.DeviceLocal
}
