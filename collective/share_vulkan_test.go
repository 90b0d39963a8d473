//go:build cgo && !novulkan

package collective

import (
	"context"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/vulkan"
)

// TestShareDeviceDefault: ranks on one physical device share one logical
// device (one VkDevice) unless DevicePerRank or GOCOLL_SHARE_DEVICE=0 opts
// out; two groups never share one.
func TestShareDeviceDefault(t *testing.T) {
	if !slices.Contains(backendsUnderTest(t), "vulkan") {
		t.Skip("vulkan backend not available")
	}
	dev := func(g *Group, r int) uint64 {
		h, err := vulkan.DeviceHandles(g.Comm(r).Device())
		if err != nil {
			t.Fatal(err)
		}
		return h.Device
	}
	a := openGroup(t, "vulkan", 3)
	if dev(a, 0) != dev(a, 1) || dev(a, 0) != dev(a, 2) {
		t.Errorf("default: ranks on one device have different VkDevices")
	}
	b := openGroup(t, "vulkan", 2)
	if dev(b, 0) != dev(b, 1) || dev(b, 0) == dev(a, 0) {
		t.Errorf("a second group shares the first group's VkDevice, or its ranks do not share one")
	}
	c := openGroup(t, "vulkan", 2, func(o *Options) { o.DevicePerRank = true })
	if dev(c, 0) == dev(c, 1) {
		t.Errorf("DevicePerRank: the ranks share a VkDevice")
	}
	t.Setenv("GOCOLL_SHARE_DEVICE", "0")
	d := openGroup(t, "vulkan", 2)
	if dev(d, 0) == dev(d, 1) || !d.opts.DevicePerRank {
		t.Errorf("GOCOLL_SHARE_DEVICE=0: the ranks share a VkDevice")
	}
}

// A device-resident all-reduce among ranks of one shared logical device
// moves nothing through host memory (the backend-seam host-byte counters
// stay at 0), and the same call with DevicePerRank does (so the counters
// are known to see the path). Results exact either way.
func TestSharedTensorNoHostBytes(t *testing.T) {
	for _, tc := range []struct {
		bk      string
		perRank bool
		host    bool // host bytes expected
	}{{"host", false, false}, {"vulkan", false, false}, {"vulkan", true, true}} {
		if !slices.Contains(backendsUnderTest(t), tc.bk) {
			continue
		}
		for _, ranks := range []int{2, 3, 9} {
			g := openGroup(t, tc.bk, ranks, func(o *Options) { o.DevicePerRank = tc.perRank })
			if g.sharedMem == tc.perRank {
				t.Fatalf("%s DevicePerRank=%v: sharedMem=%v", tc.bk, tc.perRank, g.sharedMem)
			}
			const n = 5003
			ts := make([]*Tensor[float32], ranks)
			for r := range ts {
				x, err := NewTensor[float32](g.Comm(r), n)
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				in := make([]float32, n)
				for i := range in {
					in[i] = float32(r*n + i)
				}
				if err := x.Upload(in); err != nil {
					t.Fatal(err)
				}
				ts[r] = x
			}
			before := groupHostBytes(g)
			noErrors(t, onRanks(g, func(c *Comm) error {
				return AllReduceTensor(context.Background(), c, ts[c.Rank()], Sum, Auto)
			}))
			moved := groupHostBytes(g) - before
			if (moved > 0) != tc.host {
				t.Errorf("%s DevicePerRank=%v ranks=%d: %d host bytes moved", tc.bk, tc.perRank, ranks, moved)
			}
			for r := range ts {
				out := make([]float32, n)
				if err := ts[r].Download(out); err != nil {
					t.Fatal(err)
				}
				for i, v := range out {
					want := float32(ranks*i + n*ranks*(ranks-1)/2)
					if v != want {
						t.Fatalf("%s DevicePerRank=%v ranks=%d: rank %d element %d = %v, want %v", tc.bk, tc.perRank, ranks, r, i, v, want)
					}
				}
			}
		}
	}
}

// TestSharedTensorReplay: repeated device-resident all-reduces of the same
// tensors among ranks sharing a Vulkan device resubmit the leader's
// recorded pass (backend counter Replays) and still reduce the data each
// call holds, for Sum and Mean (which differ only in push constants).
func TestSharedTensorReplay(t *testing.T) {
	if !slices.Contains(backendsUnderTest(t), "vulkan") {
		t.Skip("needs Vulkan")
	}
	const ranks, n = 2, 1024
	g := openGroup(t, "vulkan", ranks)
	ts := make([]*Tensor[float32], ranks)
	for r := range ts {
		x, err := NewTensor[float32](g.Comm(r), n)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		ts[r] = x
	}
	replays := func() int64 {
		var s int64
		for r := 0; r < ranks; r++ {
			s += g.counters(r).Replays
		}
		return s
	}
	before := replays()
	in := make([]float32, n)
	out := make([]float32, n)
	for call := 0; call < 12; call++ {
		op := Sum
		if call >= 8 {
			op = Mean
		}
		for r := range ts {
			for i := range in {
				in[i] = float32(call*1000 + r*n + i)
			}
			if err := ts[r].Upload(in); err != nil {
				t.Fatal(err)
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceTensor(context.Background(), c, ts[c.Rank()], op, Direct)
		}))
		for r := range ts {
			if err := ts[r].Download(out); err != nil {
				t.Fatal(err)
			}
			for i, v := range out {
				want := float64(0)
				for q := 0; q < ranks; q++ {
					want += float64(call*1000 + q*n + i)
				}
				if op == Mean {
					want /= ranks
				}
				if v != float32(want) {
					t.Fatalf("call %d (%v) rank %d element %d = %v, want %v", call, op, r, i, v, want)
				}
			}
		}
	}
	if got := replays() - before; got < 8 {
		t.Errorf("12 calls (8 Sum, 4 Mean): %d replayed submissions, want >= 8", got)
	}
}
