package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// fakeBuffer is a Buffer of no backend, to check that a backend rejects
// buffers it did not allocate.
type fakeBuffer struct{ n int }

func (b fakeBuffer) Len() int                    { return b.n }
func (fakeBuffer) Memory() backend.Memory        { return backend.DeviceLocal }
func (fakeBuffer) Bytes() []byte                 { return nil }
func (fakeBuffer) Write(off int, p []byte) error { return nil }
func (fakeBuffer) Read(off int, p []byte) error  { return nil }
func (fakeBuffer) Close() error                  { return nil }

// testInvalid checks that bad arguments return errors wrapping
// backend.ErrInvalidArgument, never panic, record nothing, and leave the
// stream usable: work recorded before them still runs.
func (s *suite) testInvalid(t *testing.T) {
	const size = 64
	dev, st := s.dev, s.dev.Stream()
	a := alloc(t, dev, size, backend.DeviceLocal)
	b := alloc(t, dev, size, backend.HostVisible)
	other := s.open(t, backend.OpenOptions{})
	o := alloc(t, other, size, backend.DeviceLocal)
	fake := fakeBuffer{size}
	reg := func(buf backend.Buffer, off, n int) backend.Region { return backend.Region{Buf: buf, Off: off, Len: n} }
	one := func(r backend.Region) []backend.Region { return []backend.Region{r} }
	f32, f64 := backend.F32, backend.F64
	sum := backend.Sum

	// Valid work first: b[0:16] = a[0:16] + a[0:16].
	writeT(t, a, 0, []float32{1, 2, 3, 4})
	must(t, b.Write(0, make([]byte, 16)), "Write")
	before := dev.Counters().Snapshot()
	must(t, st.Reduce(sum, f32, reg(b, 0, 16), []backend.Region{reg(a, 0, 16), reg(a, 0, 16)}, 1), "valid Reduce")
	valid := dev.Counters().Snapshot().Sub(before)

	cases := []struct {
		name string
		call func() error
	}{
		{"Alloc(-1)", func() error { _, err := dev.Alloc(-1, backend.DeviceLocal); return err }},
		{"Alloc of unknown memory", func() error { _, err := dev.Alloc(8, backend.Memory(9)); return err }},
		{"Write at -1", func() error { return a.Write(-1, []byte{1}) }},
		{"Write past the end", func() error { return a.Write(size, []byte{1}) }},
		{"Write across the end", func() error { return a.Write(size-4, make([]byte, 8)) }},
		{"Read at -1", func() error { return a.Read(-1, make([]byte, 1)) }},
		{"Read across the end", func() error { return b.Read(size-1, make([]byte, 2)) }},

		{"Copy nil dst buffer", func() error { return st.Copy(backend.Region{Len: 4}, reg(a, 0, 4)) }},
		{"Copy nil src buffer", func() error { return st.Copy(reg(a, 0, 4), backend.Region{Len: 4}) }},
		{"Copy negative offset", func() error { return st.Copy(reg(a, -4, 4), reg(b, 0, 4)) }},
		{"Copy negative length", func() error { return st.Copy(reg(a, 0, -4), reg(b, 0, -4)) }},
		{"Copy out of range", func() error { return st.Copy(reg(a, 32, size), reg(b, 0, size)) }},
		{"Copy mismatched lengths", func() error { return st.Copy(reg(a, 0, 16), reg(b, 0, 32)) }},
		{"Copy overlapping", func() error { return st.Copy(reg(a, 0, 32), reg(a, 16, 32)) }},
		{"Copy onto itself", func() error { return st.Copy(reg(a, 0, 16), reg(a, 0, 16)) }},
		{"Copy from another device", func() error { return st.Copy(reg(a, 0, 16), reg(o, 0, 16)) }},
		{"Copy from a foreign buffer", func() error { return st.Copy(reg(a, 0, 16), reg(fake, 0, 16)) }},

		{"Reduce op -1", func() error { return st.Reduce(backend.Op(-1), f32, reg(a, 0, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce op NumOps", func() error { return st.Reduce(backend.Op(backend.NumOps), f32, reg(a, 0, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce unknown dtype", func() error { return st.Reduce(sum, backend.DType(99), reg(a, 0, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce dtype NumDTypes", func() error {
			return st.Reduce(sum, backend.DType(backend.NumDTypes), reg(a, 0, 16), one(reg(b, 0, 16)), 1)
		}},
		{"Reduce no sources", func() error { return st.Reduce(sum, f32, reg(a, 0, 16), nil, 1) }},
		{"Reduce nil source buffer", func() error {
			return st.Reduce(sum, f32, reg(a, 0, 16), []backend.Region{reg(b, 0, 16), {Len: 16}}, 1)
		}},
		{"Reduce dst out of range", func() error { return st.Reduce(sum, f32, reg(a, 56, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce src out of range", func() error { return st.Reduce(sum, f32, reg(a, 0, 16), one(reg(b, 56, 16)), 1) }},
		{"Reduce negative offset", func() error { return st.Reduce(sum, f32, reg(a, -4, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce length not whole elements", func() error { return st.Reduce(sum, f32, reg(a, 0, 6), one(reg(b, 0, 6)), 1) }},
		{"Reduce offset not whole elements", func() error { return st.Reduce(sum, f32, reg(a, 2, 16), one(reg(b, 0, 16)), 1) }},
		{"Reduce src offset not whole elements", func() error {
			return st.Reduce(sum, f32, reg(a, 0, 16), []backend.Region{reg(b, 0, 16), reg(b, 18, 16)}, 1)
		}},
		{"Reduce mismatched lengths", func() error {
			return st.Reduce(sum, f32, reg(a, 0, 16), []backend.Region{reg(b, 0, 16), reg(b, 16, 32)}, 1)
		}},
		{"Reduce dst partly overlapping a source", func() error {
			return st.Reduce(sum, f32, reg(a, 0, 32), []backend.Region{reg(b, 0, 32), reg(a, 16, 32)}, 1)
		}},
		{"Reduce from another device", func() error { return st.Reduce(sum, f32, reg(a, 0, 16), one(reg(o, 0, 16)), 1) }},
		{"Reduce into another device", func() error { return st.Reduce(sum, f32, reg(o, 0, 16), one(reg(a, 0, 16)), 1) }},
		{"Reduce from a foreign buffer", func() error { return st.Reduce(sum, f32, reg(a, 0, 16), one(reg(fake, 0, 16)), 1) }},

		{"Scale unknown dtype", func() error { return st.Scale(backend.DType(-1), reg(a, 0, 16), reg(b, 0, 16), 2) }},
		{"Scale dtype 99", func() error { return st.Scale(backend.DType(99), reg(a, 0, 16), reg(b, 0, 16), 1) }},
		{"Scale length not whole elements", func() error { return st.Scale(f32, reg(a, 0, 10), reg(b, 0, 10), 2) }},
		{"Scale offset not whole elements", func() error { return st.Scale(f32, reg(a, 0, 16), reg(b, 1, 16), 2) }},
		{"Scale mismatched lengths", func() error { return st.Scale(f32, reg(a, 0, 16), reg(b, 0, 8), 2) }},
		{"Scale partly overlapping", func() error { return st.Scale(f32, reg(a, 0, 16), reg(a, 8, 16), 2) }},
		{"Scale out of range", func() error { return st.Scale(f32, reg(a, 0, size+4), reg(b, 0, size+4), 2) }},
		{"Scale nil buffer", func() error { return st.Scale(f32, reg(a, 0, 16), backend.Region{Len: 16}, 2) }},
	}
	// The integer-only operators on every floating-point type the device
	// reduces, in Reduce and ReduceMulti.
	mr, _ := st.(backend.MultiReducer)
	for _, dt := range []backend.DType{f32, f64, backend.Half, backend.BFloat16, backend.F8E4M3, backend.F8E5M2} {
		if !hasKernels(dev.Info(), dt) {
			continue
		}
		es := dt.Size()
		for _, op := range intOps {
			cases = append(cases, struct {
				name string
				call func() error
			}{fmt.Sprintf("Reduce %v %v", op, dt), func() error {
				return st.Reduce(op, dt, reg(a, 0, 4*es), []backend.Region{reg(b, 0, 4*es), reg(b, 4*es, 4*es)}, 1)
			}})
			if mr != nil {
				cases = append(cases, struct {
					name string
					call func() error
				}{fmt.Sprintf("ReduceMulti %v %v", op, dt), func() error {
					return mr.ReduceMulti(op, dt, []backend.Region{reg(a, 0, 4*es)}, []backend.Region{reg(b, 0, 4*es), reg(b, 4*es, 4*es)}, 1)
				}})
			}
		}
	}
	if dev.Info().Float64 {
		cases = append(cases,
			struct {
				name string
				call func() error
			}{"Reduce f64 offset not whole elements", func() error {
				return st.Reduce(sum, f64, reg(a, 4, 16), one(reg(b, 0, 16)), 1)
			}},
			struct {
				name string
				call func() error
			}{"Reduce f64 length not whole elements", func() error {
				return st.Reduce(sum, f64, reg(a, 0, 12), one(reg(b, 0, 12)), 1)
			}})
	}
	shares := backend.SharesMemory(dev, other)
	for _, c := range cases {
		if shares && strings.HasSuffix(c.name, "another device") {
			continue // devices that share memory use each other's buffers
		}
		isErr(t, noPanic(t, c.name, c.call), backend.ErrInvalidArgument, c.name)
	}
	if got := dev.Counters().Snapshot().Sub(before); got.Dispatches != valid.Dispatches || got.Copies != valid.Copies {
		t.Errorf("invalid calls were counted: %d dispatches and %d copies, want %d and %d", got.Dispatches, got.Copies, valid.Dispatches, valid.Copies)
	}
	submitWait(t, st)
	if got := readT[float32](t, b, 0, 4); got[0] != 2 || got[1] != 4 || got[2] != 6 || got[3] != 8 {
		t.Errorf("work recorded before the invalid calls: got %v, want [2 4 6 8]", got)
	}
}

// testClosed checks Close: it waits for submitted work, is idempotent, and
// later calls fail with errors wrapping backend.ErrClosed; and a closed
// buffer is refused.
func (s *suite) testClosed(t *testing.T) {
	t.Run("Buffer", func(t *testing.T) {
		dev, st := s.dev, s.dev.Stream()
		a := alloc(t, dev, 64, backend.DeviceLocal)
		c, err := dev.Alloc(64, backend.DeviceLocal)
		must(t, err, "Alloc")
		must(t, c.Close(), "Buffer.Close")
		must(t, c.Close(), "second Buffer.Close")
		r := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: 64} }
		isErr(t, noPanic(t, "Write", func() error { return c.Write(0, []byte{1}) }), backend.ErrClosed, "Write to a closed buffer")
		isErr(t, noPanic(t, "Read", func() error { return c.Read(0, []byte{1}) }), backend.ErrClosed, "Read from a closed buffer")
		isErr(t, noPanic(t, "Copy", func() error { return st.Copy(r(a), r(c)) }), backend.ErrClosed, "Copy from a closed buffer")
		isErr(t, noPanic(t, "Reduce", func() error {
			return st.Reduce(backend.Sum, backend.F32, r(c), []backend.Region{r(a)}, 1)
		}), backend.ErrClosed, "Reduce into a closed buffer")
		isErr(t, noPanic(t, "Scale", func() error { return st.Scale(backend.F32, r(a), r(c), 2) }), backend.ErrClosed, "Scale from a closed buffer")
	})

	t.Run("Device", func(t *testing.T) {
		const n = 1 << 16
		dev := s.open(t, backend.OpenOptions{})
		st := dev.Stream()
		a := alloc(t, dev, 4*n, backend.DeviceLocal)
		b := alloc(t, dev, 4*n, backend.HostVisible)
		in := make([]float32, n)
		fillExact(newRand(31), in)
		writeT(t, a, 0, in)
		whole := func(buf backend.Buffer) backend.Region { return backend.Region{Buf: buf, Len: 4 * n} }
		for range 16 {
			must(t, st.Reduce(backend.Sum, backend.F32, whole(b), []backend.Region{whole(a), whole(a), whole(a)}, 1), "Reduce")
		}
		f, err := st.Submit()
		must(t, err, "Submit")
		must(t, st.Scale(backend.F32, whole(b), whole(a), 2), "Scale") // recorded, never submitted
		must(t, dev.Close(), "Close")

		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if err := f.Wait(cancelled); err != nil {
			t.Errorf("Wait after Close: %v, want nil: Close must wait for submitted work", err)
		}
		must(t, dev.Close(), "second Close")

		isErr(t, noPanic(t, "Alloc", func() error { _, err := dev.Alloc(8, backend.DeviceLocal); return err }), backend.ErrClosed, "Alloc after Close")
		isErr(t, noPanic(t, "Write", func() error { return a.Write(0, []byte{1}) }), backend.ErrClosed, "Write after Close")
		isErr(t, noPanic(t, "Read", func() error { return b.Read(0, []byte{1}) }), backend.ErrClosed, "Read after Close")
		isErr(t, noPanic(t, "Copy", func() error { return st.Copy(whole(b), whole(a)) }), backend.ErrClosed, "Copy after Close")
		isErr(t, noPanic(t, "Reduce", func() error {
			return st.Reduce(backend.Sum, backend.F32, whole(b), []backend.Region{whole(a)}, 1)
		}), backend.ErrClosed, "Reduce after Close")
		isErr(t, noPanic(t, "Scale", func() error { return st.Scale(backend.F32, whole(b), whole(a), 2) }), backend.ErrClosed, "Scale after Close")
		isErr(t, noPanic(t, "Submit", func() error { _, err := st.Submit(); return err }), backend.ErrClosed, "Submit after Close")
		noPanic(t, "Buffer.Close after Close", a.Close)
	})
}
