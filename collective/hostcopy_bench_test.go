package collective

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// copyMem is host memory behind the Buffer calls a comm's parallel host
// copies make (Read and Write only).
type copyMem struct {
	backend.Buffer
	b []byte
}

func (m *copyMem) Write(off int, p []byte) error { copy(m.b[off:], p); return nil }
func (m *copyMem) Read(off int, p []byte) error  { copy(p, m.b[off:]); return nil }

// BenchmarkHostCopy: a comm's large host copies (Comm.copyIn and copyOut,
// then copyWait: the staging of HostBuffer-less device collectives and the
// direct exchange's gathers) on the process's pool, into and out of a
// buffer, 4 MiB and 64 MiB, by one comm and by four at once (ranks of one
// process staging together). Written against the comm's methods only, so
// the same file runs on every revision that has them: benchstat compares
// them across a change of the pool.
func BenchmarkHostCopy(b *testing.B) {
	for _, ranks := range []int{1, 4} {
		for _, size := range []int{4 << 20, 64 << 20} {
			for _, dir := range []string{"in", "out"} {
				b.Run(fmt.Sprintf("ranks%d/%s/%dMiB", ranks, dir, size>>20), func(b *testing.B) {
					benchHostCopy(b, ranks, size, dir == "out")
				})
			}
		}
	}
}

func benchHostCopy(b *testing.B, ranks, size int, out bool) {
	comms := make([]*Comm, ranks)
	mems := make([]*copyMem, ranks)
	ps := make([][]byte, ranks)
	for r := range comms {
		comms[r] = new(Comm)
		mems[r] = &copyMem{b: make([]byte, size)}
		ps[r] = make([]byte, size)
		for i := range ps[r] {
			ps[r][i] = byte(i*7 + r)
		}
	}
	one := func(r int) error {
		c := comms[r]
		if out {
			c.copyOut(mems[r], 0, ps[r])
		} else {
			c.copyIn(mems[r], 0, ps[r])
		}
		return c.copyWait()
	}
	errs := make(chan error, ranks)
	b.SetBytes(int64(ranks * size))
	b.ResetTimer()
	for b.Loop() {
		if ranks == 1 {
			if err := one(0); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for r := range ranks {
			go func() { errs <- one(r) }()
		}
		for range ranks {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
}
