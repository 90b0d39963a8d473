package algo_test

import (
	"reflect"
	"testing"

	"github.com/gocoll/gocoll/internal/algo"
)

// TestNewHierarchy: consecutive ranks by size, the last group smaller, each
// led by its first rank.
func TestNewHierarchy(t *testing.T) {
	h := algo.NewHierarchy(7, 3)
	want := algo.Hierarchy{All: []int{0, 1, 2, 3, 4, 5, 6}, Groups: [][]int{{0, 1, 2}, {3, 4, 5}, {6}},
		GroupOf: []int{0, 0, 0, 1, 1, 1, 2}, Leaders: []int{0, 3, 6}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("NewHierarchy(7, 3) = %+v, want %+v", h, want)
	}
	if one := algo.NewHierarchy(4, 8); len(one.Groups) != 1 || !reflect.DeepEqual(one.Leaders, []int{0}) {
		t.Fatalf("NewHierarchy(4, 8) = %+v, want one group led by 0", one)
	}
}
