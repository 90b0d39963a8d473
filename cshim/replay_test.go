//go:build cgo && !novulkan

package cshim

import (
	"math/rand"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// TestReplay: a submission of one dispatch that repeats the one before is
// replayed from a recorded command buffer from the third on (Replays
// counts them), with the same results as recording it; a different
// dispatch, a second command, or a destroyed buffer whose address a new one
// may reuse is recorded again. Random sequences of those, each checked
// against a plain loop.
func TestReplay(t *testing.T) {
	d := open(t, OpenOptions{RingSize: 3})
	k := scaleKernel(t, d, true)
	const n = 256
	src := newBuffer(t, d, 4*n, backend.HostVisible)
	dst := newBuffer(t, d, 4*n, backend.HostVisible)
	var push [MaxPushBytes]byte
	in := make([]float32, n)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	// call dispatches dst = src * scale over the first m elements (after an
	// optional copy), submits and waits, and checks dst.
	call := func(what string, m int, scale float32, copyFirst bool) {
		t.Helper()
		for i := range in {
			in[i] = float32(rng.Intn(2001) - 1000)
		}
		putFloats(src.Bytes(), in)
		putFloats(dst.Bytes(), make([]float32, n))
		if copyFirst {
			if err := d.CmdCopy(dst, 0, src, 0, 4); err != nil {
				t.Fatal(err)
			}
		}
		err := d.CmdDispatch(k, [3]uint32{uint32(m+63) / 64, 1, 1},
			[]Binding{{Buffer: dst, Range: 4 * n}, {Buffer: src, Range: 4 * n}}, scalePush(push[:], uint32(m), 0, 0, scale))
		if err != nil {
			t.Fatal(err)
		}
		tk, err := d.Submit()
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := d.Wait(tk, -1); !ok || err != nil {
			t.Fatalf("%s: Wait = %v, %v", what, ok, err)
		}
		got := floats(dst.Bytes())
		for i := range got {
			want := float32(0)
			if i < m {
				want = in[i] * scale
			}
			if got[i] != want {
				t.Fatalf("%s (m %d, scale %v): element %d = %v, want %v", what, m, scale, i, got[i], want)
			}
		}
	}
	replays := func() uint64 { return d.Counters().Replays }

	r0 := replays()
	for i := 0; i < 6; i++ {
		call("repeat", n, 3, false)
	}
	if got := replays() - r0; got != 4 {
		t.Errorf("6 identical one-dispatch submissions: %d replays, want 4", got)
	}
	// A different push constant, then a second command: recorded.
	r0 = replays()
	call("other scale", n, 5, false)
	call("copy first", n, 3, true)
	if got := replays() - r0; got != 0 {
		t.Errorf("changed submissions: %d replays, want 0", got)
	}
	// A new buffer in place of a destroyed one: never the old recording.
	for i := 0; i < 3; i++ {
		call("before destroy", n, 3, false)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = newBuffer(t, d, 4*n, backend.HostVisible)
	r0 = replays()
	call("new buffer", n, 3, false)
	if got := replays() - r0; got != 0 {
		t.Errorf("after a destroy: %d replays, want 0", got)
	}
	// Random mixes, through ring wrap-around (3 slots).
	for i := 0; i < 300; i++ {
		m := []int{n, n, n, 1, 63, 65}[rng.Intn(6)]
		scale := []float32{3, 3, 3, -2}[rng.Intn(4)]
		call("random", m, scale, rng.Intn(8) == 0)
	}
	if replays() == r0 {
		t.Error("no replay in 300 random submissions")
	}
}

// TestReplayThenRecord: a command after a replay-eligible dispatch records
// both into the ring, in order.
func TestReplayThenRecord(t *testing.T) {
	d := open(t, OpenOptions{})
	k := scaleKernel(t, d, true)
	const n = 64
	src := newBuffer(t, d, 4*n, backend.HostVisible)
	dst := newBuffer(t, d, 4*n, backend.HostVisible)
	out := newBuffer(t, d, 4*n, backend.HostVisible)
	var push [MaxPushBytes]byte
	bind := []Binding{{Buffer: dst, Range: 4 * n}, {Buffer: src, Range: 4 * n}}
	submit := func() {
		t.Helper()
		tk, err := d.Submit()
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := d.Wait(tk, -1); !ok || err != nil {
			t.Fatalf("Wait = %v, %v", ok, err)
		}
	}
	for i := 0; i < 4; i++ {
		vals := make([]float32, n)
		for j := range vals {
			vals[j] = float32(i*n + j)
		}
		putFloats(src.Bytes(), vals)
		if err := d.CmdDispatch(k, [3]uint32{1, 1, 1}, bind, scalePush(push[:], n, 0, 0, 2)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			// The dispatch is replay-eligible here; the copy must see its result.
			if err := d.CmdCopy(out, 0, dst, 0, 4*n); err != nil {
				t.Fatal(err)
			}
		}
		submit()
		if i == 3 {
			got := floats(out.Bytes())
			for j := range got {
				if got[j] != 2*vals[j] {
					t.Fatalf("element %d = %v, want %v", j, got[j], 2*vals[j])
				}
			}
		}
	}
}
