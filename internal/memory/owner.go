package memory

import "sync"

// Owner is the lifetime of memory a call can resolve: the calls using it
// are counted until they release it, and Close, once it marked the owner
// closed (no call can acquire it any more), waits for them. The zero Owner
// is open, with no user.
type Owner struct {
	mu     sync.Mutex
	users  int
	closed bool
	idle   chan struct{} // made by a Wait waiting for users
}

// Acquire counts a call as a user; false when the owner is closed.
func (o *Owner) Acquire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.users++
	return true
}

// Release ends a call's use.
func (o *Owner) Release() {
	o.mu.Lock()
	o.users--
	if o.users == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
	o.mu.Unlock()
}

// IsClosed reports whether Close was called.
func (o *Owner) IsClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// Close marks the owner closed; it reports false if it already was.
func (o *Owner) Close() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.closed = true
	return true
}

// Wait waits until no call uses the owner (after Close, none can start).
func (o *Owner) Wait() {
	o.mu.Lock()
	if o.users == 0 {
		o.mu.Unlock()
		return
	}
	if o.idle == nil {
		o.idle = make(chan struct{})
	}
	idle := o.idle
	o.mu.Unlock()
	<-idle
}
