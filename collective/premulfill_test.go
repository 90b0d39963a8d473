package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/internal/faultinject"
)

// TestPreMulSumFillOnce: the integer tensor path of PreMulSum writes its
// pooled buffer of the scalar once for repeated calls with the same op,
// type and length (and for shorter ones, and for another op with the same
// scalar), and again only where the scalar, the type or a greater length
// asks for it; every call's result is the sum of the ranks' products,
// computed here with plain integer loops (wrapping).
func TestPreMulSumFillOnce(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		const N, n = 3, 301
		g := openGroup(t, bk, N)
		scalars := []float64{3, -2, 5}
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			op, err := c.PreMulSum(scalars[r])
			if err != nil {
				return err
			}
			same, err := c.PreMulSum(scalars[r]) // another op, the same scalar
			if err != nil {
				return err
			}
			other, err := c.PreMulSum(scalars[r] + 1)
			if err != nil {
				return err
			}
			t32, err := NewTensor[int32](c, n)
			if err != nil {
				return err
			}
			defer t32.Close()
			short, err := NewTensor[int32](c, n/2)
			if err != nil {
				return err
			}
			defer short.Close()
			long, err := NewTensor[int32](c, 2*n+1)
			if err != nil {
				return err
			}
			defer long.Close()
			t8, err := NewTensor[int8](c, n)
			if err != nil {
				return err
			}
			defer t8.Close()
			base := c.preMulFilled.Fills
			// call all-reduces t with op (scalar s on rank q, scale[q])
			// from inputs i*7 + q - 50 and checks the result.
			call := func(name string, t *Tensor[int32], op Op, scale []float64, want uint64) error {
				in := make([]int32, t.Len())
				for i := range in {
					in[i] = int32(i*7 + r - 50)
				}
				if err := t.Upload(in); err != nil {
					return err
				}
				if err := AllReduceTensor(ctx, c, t, op, Auto); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				got := make([]int32, t.Len())
				if err := t.Download(got); err != nil {
					return err
				}
				ref := make([]int32, t.Len())
				for i := range ref {
					for q := range N {
						ref[i] += int32(i*7+q-50) * int32(scale[q])
					}
				}
				if !slices.Equal(got, ref) {
					return fmt.Errorf("%s: rank %d: got %v..., want %v...", name, r, got[:min(4, len(got))], ref[:min(4, len(ref))])
				}
				if f := c.preMulFilled.Fills - base; f != want {
					return fmt.Errorf("%s: rank %d: %d fills of the scalar's buffer so far, want %d", name, r, f, want)
				}
				return nil
			}
			plus := []float64{scalars[0] + 1, scalars[1] + 1, scalars[2] + 1}
			for i := range 5 {
				if err := call(fmt.Sprintf("repeated call %d", i), t32, op, scalars, 1); err != nil {
					return err
				}
			}
			steps := []struct {
				name  string
				t     *Tensor[int32]
				op    Op
				scale []float64
				fills uint64
			}{
				{"shorter", short, op, scalars, 1},
				{"same scalar, another op", t32, same, scalars, 1},
				{"another scalar", t32, other, plus, 2},
				{"another scalar again", t32, other, plus, 2},
				{"back to the first scalar", t32, op, scalars, 3},
				{"longer", long, op, scalars, 4},
				{"the first length after a longer", t32, op, scalars, 4},
			}
			for _, s := range steps {
				if err := call(s.name, s.t, s.op, s.scale, s.fills); err != nil {
					return err
				}
			}
			// Another type refills, once.
			in8 := make([]int8, n)
			for range 2 {
				for i := range in8 {
					in8[i] = int8(i + r)
				}
				if err := t8.Upload(in8); err != nil {
					return err
				}
				if err := AllReduceTensor(ctx, c, t8, op, Auto); err != nil {
					return err
				}
				got := make([]int8, n)
				if err := t8.Download(got); err != nil {
					return err
				}
				for i := range got {
					var want int8
					for q := range N {
						want += int8(i+q) * int8(scalars[q])
					}
					if got[i] != want {
						return fmt.Errorf("int8: rank %d: element %d = %d, want %d", r, i, got[i], want)
					}
				}
			}
			if f := c.preMulFilled.Fills - base; f != 5 {
				return fmt.Errorf("int8: rank %d: %d fills, want 5", r, f)
			}
			return nil
		}))
	}
}

// TestPreMulSumTensorFailure: a device failure while rank 0's products are
// made (the first recorded command on its device, the Scale kernel or the
// integer Prod, failed; or the wait for it) fails that rank with the
// device's error and breaks the group: the other ranks fail with
// ErrGroupBroken naming it, and a later Barrier fails too (a refusal would
// leave the group usable on a device that may be gone).
func TestPreMulSumTensorFailure(t *testing.T) {
	fi := faultBackend(t, "host")
	for _, tc := range []struct {
		kind faultinject.Kind
		i32  bool
	}{{faultinject.FailRecord, false}, {faultinject.FailRecord, true}, {faultinject.FailWait, false}} {
		fi.Arm(faultinject.Plan{Kind: tc.kind, Device: 0, K: 1})
		g := openGroup(t, "faultinject-host", 3)
		ctx := context.Background()
		errs := onRanks(g, func(c *Comm) error {
			op, err := c.PreMulSum(3)
			if err != nil {
				return err
			}
			if tc.i32 {
				tt, err := NewTensor[int32](c, 100)
				if err != nil {
					return err
				}
				defer tt.Close()
				return AllReduceTensor(ctx, c, tt, op, Auto)
			}
			tt, err := NewTensor[float32](c, 100)
			if err != nil {
				return err
			}
			defer tt.Close()
			return AllReduceTensor(ctx, c, tt, op, Ring)
		})
		name := fmt.Sprintf("%v (int32 %v)", tc.kind, tc.i32)
		if !errors.Is(errs[0], ErrOutOfMemory) || !errors.Is(errs[0], faultinject.ErrInjected) {
			t.Errorf("%s: rank 0: %v, want the injected ErrOutOfMemory", name, errs[0])
		}
		for r := 1; r < 3; r++ {
			if !errors.Is(errs[r], ErrGroupBroken) || !errors.Is(errs[r], ErrOutOfMemory) {
				t.Errorf("%s: rank %d: %v, want ErrGroupBroken naming rank 0's failure", name, r, errs[r])
			}
		}
		for r, err := range onRanks(g, func(c *Comm) error { return Barrier(ctx, c) }) {
			if !errors.Is(err, ErrGroupBroken) {
				t.Errorf("%s: Barrier after the failure, rank %d: %v, want ErrGroupBroken", name, r, err)
			}
		}
		g.Close()
	}
}
