package oplist

import (
	"slices"
	"testing"
)

type elem struct {
	id   int
	a, b Links[elem]
}

func ids(q *List[elem], links func(*elem) *Links[elem]) []int {
	var s []int
	for e := q.Head(); e != nil; e = links(e).Next() {
		s = append(s, e.id)
	}
	return s
}

func aOf(e *elem) *Links[elem] { return &e.a }
func bOf(e *elem) *Links[elem] { return &e.b }

func newElems(n int) []*elem {
	es := make([]*elem, n)
	for i := range es {
		es[i] = &elem{id: i}
	}
	return es
}

// Push keeps posting order, Pop takes from the front, Remove takes any
// element out (head, middle, tail, the only one) and the rest keep order.
func TestOrder(t *testing.T) {
	es := newElems(5)
	var q List[elem]
	if q.Head() != nil || q.Pop() != nil {
		t.Fatal("the zero list is not empty")
	}
	for _, e := range es {
		q.Push(e, &e.a)
	}
	if got := ids(&q, aOf); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("after pushes: %v", got)
	}
	for _, c := range []struct {
		rm   int
		want []int
	}{{2, []int{0, 1, 3, 4}}, {0, []int{1, 3, 4}}, {4, []int{1, 3}}} {
		if !q.Remove(&es[c.rm].a) {
			t.Fatalf("Remove(%d) reported it missing", c.rm)
		}
		if got := ids(&q, aOf); !slices.Equal(got, c.want) {
			t.Fatalf("after Remove(%d): %v, want %v", c.rm, got, c.want)
		}
	}
	q.Push(es[0], &es[0].a) // a removed element can be pushed again
	for _, want := range []int{1, 3, 0} {
		if e := q.Pop(); e == nil || e.id != want {
			t.Fatalf("Pop = %v, want %d", e, want)
		}
	}
	if q.Pop() != nil || q.Head() != nil || q.tail != nil {
		t.Fatal("the list is not empty after popping everything")
	}
	q.Push(es[1], &es[1].a)
	if !q.Remove(&es[1].a) || q.Head() != nil || q.tail != nil {
		t.Fatal("removing the only element did not empty the list")
	}
}

// Removing an element that is not in the list reports it and changes
// nothing, whether it never was in it or was removed already.
func TestRemoveMissing(t *testing.T) {
	es := newElems(3)
	var q List[elem]
	if q.Remove(&es[0].a) {
		t.Fatal("Remove on an empty list reported the element")
	}
	q.Push(es[0], &es[0].a)
	q.Push(es[1], &es[1].a)
	if q.Remove(&es[2].a) {
		t.Fatal("Remove of an element never pushed reported it")
	}
	if !q.Remove(&es[0].a) || q.Remove(&es[0].a) {
		t.Fatal("a second Remove of one element reported it")
	}
	if got := ids(&q, aOf); !slices.Equal(got, []int{1}) {
		t.Fatalf("list %v, want [1]", got)
	}
}

// One element is in two lists through two fields; each list has its own
// order, and removal from one leaves the other alone.
func TestTwoFields(t *testing.T) {
	es := newElems(3)
	var qa List[elem]
	var qb List[elem]
	for i := range es {
		qa.Push(es[i], &es[i].a)
		qb.Push(es[len(es)-1-i], &es[len(es)-1-i].b)
	}
	qa.Remove(&es[1].a)
	if got := ids(&qa, aOf); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("list a %v", got)
	}
	if got := ids(&qb, bOf); !slices.Equal(got, []int{2, 1, 0}) {
		t.Fatalf("list b %v", got)
	}
}

func TestNoAlloc(t *testing.T) {
	es := newElems(8)
	var q List[elem]
	n := testing.AllocsPerRun(100, func() {
		for _, e := range es {
			q.Push(e, &e.a)
		}
		q.Remove(&es[3].a)
		q.Remove(&es[7].a)
		for q.Pop() != nil {
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

func BenchmarkPushPop(b *testing.B) {
	es := newElems(16)
	var q List[elem]
	for b.Loop() {
		for _, e := range es {
			q.Push(e, &e.a)
		}
		q.Remove(&es[5].a)
		for q.Pop() != nil {
		}
	}
}
