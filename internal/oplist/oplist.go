// Package oplist is an intrusive FIFO list: its elements carry their own
// links (a Links field), so push, pop and removal are O(1) and allocate
// nothing, and one element can be in several lists at once through
// several Links fields.
package oplist

// Links are an element's links in one List: a field of the element, given
// to Push with the element and to Remove.
type Links[T any] struct {
	prev, next *Links[T]
	elem       *T
}

// Next returns the element after the one holding k (nil: the last).
func (k *Links[T]) Next() *T {
	if k.next == nil {
		return nil
	}
	return k.next.elem
}

// List is a FIFO of elements linked through their Links. The zero List is
// empty and ready to use. All elements of a list link through the same
// field.
type List[T any] struct{ head, tail *Links[T] }

// Head returns the first element (nil: q is empty); Links.Next walks on.
func (q *List[T]) Head() *T {
	if q.head == nil {
		return nil
	}
	return q.head.elem
}

// Push appends o, whose links for q are k; o must not be in q.
func (q *List[T]) Push(o *T, k *Links[T]) {
	k.prev, k.next, k.elem = q.tail, nil, o
	if q.tail != nil {
		q.tail.next = k
	} else {
		q.head = k
	}
	q.tail = k
}

// Remove takes the element whose links for q are k out of q; it reports
// whether the element was in it.
func (q *List[T]) Remove(k *Links[T]) bool {
	if k.prev == nil && q.head != k {
		return false
	}
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		q.head = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	} else {
		q.tail = k.prev
	}
	*k = Links[T]{}
	return true
}

// Pop removes and returns the first element (nil: q is empty).
func (q *List[T]) Pop() *T {
	k := q.head
	if k == nil {
		return nil
	}
	o := k.elem
	q.Remove(k)
	return o
}
