package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// bcastLayout is a group layout BroadcastIntoTensor is tested on: the
// host backend, and on Vulkan the ranks sharing one device (one submission
// reading root's tensor) and a device per rank (the tree).
type bcastLayout struct {
	bk      string
	perRank bool
}

func bcastIntoLayouts(t *testing.T) []bcastLayout {
	out := []bcastLayout{{"host", false}}
	if slices.Contains(backendsUnderTest(t), "vulkan") {
		out = append(out, bcastLayout{"vulkan", false}, bcastLayout{"vulkan", true})
	}
	return out
}

// TestBroadcastIntoTensor: root's send lands in every rank's recv, out of
// place, in place on root (send == recv) and through the Async form, with
// non-roots passing nil or a send tensor that stays unwritten, and peers
// calling BroadcastTensor; 1 to 7 ranks, every root in turn, sizes 0, 1,
// odd and around 256 and 4096 elements, int32 and int8, on host and
// lavapipe; checked element by element against root's input.
func TestBroadcastIntoTensor(t *testing.T) {
	sizes := []int{0, 1, 7, 255, 256, 257, 4095, 4096, 4097}
	for _, l := range bcastIntoLayouts(t) {
		ranks := []int{1, 2, 3, 4, 5, 6, 7}
		switch {
		case l.perRank:
			ranks = []int{2, 3}
		case l.bk != "host":
			ranks = []int{1, 2, 3, 5, 7}
		}
		for _, N := range ranks {
			g := openGroup(t, l.bk, N, func(o *Options) { o.DevicePerRank = l.perRank; o.ChunkBytes = 1024 })
			for i, n := range sizes {
				root := i % N
				name := fmt.Sprintf("%s/perRank=%v/N=%d/n=%d/root=%d", l.bk, l.perRank, N, n, root)
				for form := range 4 {
					bcastIntoCase[int32](t, g, name, n, root, form)
				}
				bcastIntoCase[int8](t, g, name, n, root, i%4)
			}
		}
	}
}

// bcastIntoCase runs one BroadcastIntoTensor of n elements from root: form
// 0 out of place, 1 in place on root, 2 the Async form, 3 the non-roots
// calling BroadcastTensor on recv.
func bcastIntoCase[T int32 | int8](t *testing.T, g *Group, name string, n, root, form int) {
	t.Helper()
	ctx := context.Background()
	N := g.Size()
	in := func(r, i int) T { return T(i*31 + r*97 + 5) }
	errs := onRanks(g, func(c *Comm) error {
		r := c.Rank()
		send, err := NewTensor[T](c, n)
		if err != nil {
			return err
		}
		defer send.Close()
		recv, err := NewTensor[T](c, n)
		if err != nil {
			return err
		}
		defer recv.Close()
		src := make([]T, n)
		for i := range src {
			src[i] = in(r, i)
		}
		if err := send.Upload(src); err != nil {
			return err
		}
		old := make([]T, n)
		for i := range old {
			old[i] = T(-1 - i)
		}
		if err := recv.Upload(old); err != nil {
			return err
		}
		s := send
		if r != root && r%2 == 1 {
			s = nil // not used off root
		}
		switch {
		case form == 1 && r == root:
			if err := recv.Upload(src); err != nil {
				return err
			}
			err = BroadcastIntoTensor(ctx, c, recv, recv, root)
		case form == 2:
			err = BroadcastIntoTensorAsync(ctx, c, s, recv, root).Wait(ctx)
		case form == 3 && r != root:
			err = BroadcastTensor(ctx, c, recv, root)
		default:
			err = BroadcastIntoTensor(ctx, c, s, recv, root)
		}
		if err != nil {
			return err
		}
		got := make([]T, n)
		if err := recv.Download(got); err != nil {
			return err
		}
		for i, v := range got {
			if want := in(root, i); v != want {
				return fmt.Errorf("form %d: rank %d: recv[%d] = %d, want %d (root's send)", form, r, i, v, want)
			}
		}
		if err := send.Download(got); err != nil {
			return err
		}
		if form != 1 || r != root {
			if !slices.Equal(got, src) {
				return fmt.Errorf("form %d: rank %d: send was written", form, r)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("%s: %T: rank %d of %d: %v", name, *new(T), r, N, err)
		}
	}
}

// TestBroadcastIntoTensorRefused: on root, send overlapping recv other than
// as the same tensor, and send of another length than recv, fail with
// ErrInvalidArgument on every rank before any data moves (every recv
// untouched); a tensor of another comm too; the group stays usable.
func TestBroadcastIntoTensorRefused(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		const N, n, root = 3, 64, 1
		g := openGroup(t, bk, N)
		for _, tc := range []string{"partial overlap", "length", "another comm's"} {
			errs := onRanks(g, func(c *Comm) error {
				r := c.Rank()
				whole, err := NewTensor[int32](c, 2*n)
				if err != nil {
					return err
				}
				defer whole.Close()
				init := make([]int32, 2*n)
				for i := range init {
					init[i] = int32(r*1000 + i)
				}
				if err := whole.Upload(init); err != nil {
					return err
				}
				buf, _ := whole.Buffer()
				recv, err := WrapTensor[int32](c, buf, 0, n)
				if err != nil {
					return err
				}
				var send *Tensor[int32]
				if r == root {
					switch tc {
					case "partial overlap":
						send, err = WrapTensor[int32](c, buf, 4*(n/2), n)
					case "length":
						send, err = WrapTensor[int32](c, buf, 4*n, n-1)
					default:
						send, err = WrapTensor[int32](g.Comm((r+1)%N), buf, 4*n, n)
					}
					if err != nil {
						return err
					}
				}
				err = BroadcastIntoTensor(ctx, c, send, recv, root)
				if !errors.Is(err, ErrInvalidArgument) {
					return fmt.Errorf("%s: rank %d: got %v, want ErrInvalidArgument", tc, r, err)
				}
				got := make([]int32, 2*n)
				if err := whole.Download(got); err != nil {
					return err
				}
				if !slices.Equal(got, init) {
					return fmt.Errorf("%s: rank %d: memory written by a refused call", tc, r)
				}
				return nil
			})
			noErrors(t, errs)
		}
		// Usable afterwards.
		noErrors(t, onRanks(g, func(c *Comm) error {
			tt, err := NewTensor[int32](c, 5)
			if err != nil {
				return err
			}
			defer tt.Close()
			if err := tt.Upload([]int32{int32(c.Rank()), 1, 2, 3, 4}); err != nil {
				return err
			}
			if err := BroadcastIntoTensor(ctx, c, tt, tt, root); err != nil {
				return err
			}
			got := make([]int32, 5)
			if err := tt.Download(got); err != nil {
				return err
			}
			if want := []int32{root, 1, 2, 3, 4}; !slices.Equal(got, want) {
				return fmt.Errorf("rank %d: got %v, want %v", c.Rank(), got, want)
			}
			return nil
		}))
	}
}
