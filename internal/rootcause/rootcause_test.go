package rootcause

import (
	"errors"
	"testing"
)

var (
	own     = errors.New("own failure")
	other   = errors.New("own failure of another rank")
	derived = errors.New("broken by another rank")
	gone    = errors.New("a rank is gone")
)

func isDerived(err error) bool { return err == derived }
func isGone(err error) bool    { return err == gone }

func TestPick(t *testing.T) {
	for _, c := range []struct {
		name  string
		errs  []error
		order []int
		broke int
		want  error
	}{
		{"none failed", []error{nil, nil}, nil, -1, nil},
		{"the rank that broke the group", []error{other, own}, []int{0, 1}, 1, own},
		{"the breaker's error is derived", []error{derived, own}, []int{0, 1}, 0, own},
		{"a gone rank only without an own failure", []error{gone, derived, own}, []int{0, 1, 2}, -1, own},
		{"a gone rank before derived ones", []error{derived, gone}, []int{0, 1}, -1, gone},
		{"only derived: the first to return", []error{derived, derived}, []int{1, 0}, -1, derived},
	} {
		if got := Pick(c.errs, c.order, c.broke, isDerived, isGone); got != c.want {
			t.Errorf("%s: Pick = %v, want %v", c.name, got, c.want)
		}
	}
}
