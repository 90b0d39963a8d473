package memory

// MaxUses bounds the owners a Uses holds without allocating (a call's
// send, recv, and a queued operation's named memory).
const MaxUses = 8

// Uses is the owners one call resolved, each counted as used by the call
// until Release. It lives on the caller's stack (no allocation up to
// MaxUses owners). Inside an operation that resolved memory when it was
// queued (Parent), that memory counts as held already.
type Uses struct {
	own    [MaxUses]*Owner
	n      int
	more   []*Owner // past MaxUses
	Parent *Uses    // what the queued operation running this call holds
}

// Add counts the call as a user of o (nil: nothing); false when o is
// closed.
func (u *Uses) Add(o *Owner) bool {
	if o == nil || u.Holds(o) || (u.Parent != nil && u.Parent.Holds(o)) {
		return true // held by this call, or by the queued operation running it
	}
	if !o.Acquire() {
		return false
	}
	if u.n < MaxUses {
		u.own[u.n] = o
		u.n++
	} else {
		u.more = append(u.more, o)
	}
	return true
}

// Holds reports whether u counts the call as a user of o.
func (u *Uses) Holds(o *Owner) bool {
	for _, x := range u.own[:u.n] {
		if x == o {
			return true
		}
	}
	for _, x := range u.more {
		if x == o {
			return true
		}
	}
	return false
}

// Release ends the call's use of every owner u holds, and leaves u empty
// (its Parent kept).
func (u *Uses) Release() {
	for i := range u.own[:u.n] {
		u.own[i].Release()
		u.own[i] = nil
	}
	u.n = 0
	for i, o := range u.more {
		o.Release()
		u.more[i] = nil
	}
	u.more = u.more[:0]
}

// Take moves u's owners to the returned Uses, without a Parent (an
// asynchronous operation keeps them until it is done), and leaves u
// empty.
func (u *Uses) Take() Uses {
	t := *u
	t.Parent = nil
	*u = Uses{}
	return t
}
