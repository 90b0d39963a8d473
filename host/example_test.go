package host_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
)

// Reduce two vectors into a third with the mean (the sum, then one multiply
// by 1/2) on the host backend.
func Example() {
	d, err := host.Open(backend.OpenOptions{})
	if err != nil {
		panic(err)
	}
	defer d.Close()

	put := func(vals ...float32) backend.Region {
		b, err := d.Alloc(4*len(vals), backend.HostVisible)
		if err != nil {
			panic(err)
		}
		for i, v := range vals {
			binary.NativeEndian.PutUint32(b.Bytes()[4*i:], math.Float32bits(v))
		}
		return backend.Region{Buf: b, Len: 4 * len(vals)}
	}
	a, b, out := put(1, 2, 3), put(3, 4, 5), put(0, 0, 0)

	st := d.Stream()
	if err := st.Reduce(backend.Sum, backend.F32, out, []backend.Region{a, b}, 0.5); err != nil {
		panic(err)
	}
	f, err := st.Submit()
	if err != nil {
		panic(err)
	}
	if err := f.Wait(context.Background()); err != nil {
		panic(err)
	}
	mean := make([]float32, 3)
	for i := range mean {
		mean[i] = math.Float32frombits(binary.NativeEndian.Uint32(out.Buf.Bytes()[4*i:]))
	}
	fmt.Println(mean)
	fmt.Println(d.Counters().Snapshot().Dispatches, "dispatch")
	// Output:
	// [2 3 4]
	// 1 dispatch
}
