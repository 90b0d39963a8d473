// Package relay is a rank's failure as the other ranks of its group are
// told it (the cause their error names when the failure broke the group):
// it matches what the failure matches, except the context errors (only the
// rank whose context ended matches those: the others cancelled nothing)
// and the typed errors that describe the failing rank's own view, which are
// reached only through the failure itself.
package relay

import (
	"context"
	"errors"
)

// Cause is the failure Err relayed: errors.As finds no error of type V
// through it.
type Cause[V error] struct{ Err error }

func (e Cause[V]) Error() string { return e.Err.Error() }

// Is matches what Err matches, except the context errors.
func (e Cause[V]) Is(t error) bool {
	if t == context.Canceled || t == context.DeadlineExceeded {
		return false
	}
	return errors.Is(e.Err, t)
}

// As finds Err's typed errors, except those of type V.
func (e Cause[V]) As(t any) bool {
	if _, ok := t.(*V); ok {
		return false
	}
	return errors.As(e.Err, t)
}
