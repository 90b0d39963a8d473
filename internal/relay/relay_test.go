package relay

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type viewError struct{ missing []int }

func (e *viewError) Error() string { return fmt.Sprint("waiting for ", e.missing) }

type kindError struct{ kind string }

func (e *kindError) Error() string { return e.kind }

var errSentinel = errors.New("sentinel")

// A relayed cause matches the failure's sentinels and typed errors, but
// neither its context errors nor the typed errors of the failing rank's
// view.
func TestCause(t *testing.T) {
	ke := &kindError{"device lost"}
	failure := fmt.Errorf("rank 2: %w: %w: %w", context.DeadlineExceeded, errSentinel,
		fmt.Errorf("%w (%w)", ke, &viewError{[]int{1}}))
	if !errors.Is(failure, context.DeadlineExceeded) {
		t.Fatal("the failure itself should match its context error")
	}
	r := Cause[*viewError]{Err: failure}
	if r.Error() != failure.Error() {
		t.Errorf("Error() = %q, want the failure's %q", r.Error(), failure.Error())
	}
	if errors.Is(r, context.DeadlineExceeded) || errors.Is(r, context.Canceled) {
		t.Error("a relayed cause matches a context error")
	}
	if !errors.Is(r, errSentinel) {
		t.Error("a relayed cause does not match the failure's sentinel")
	}
	var k *kindError
	if !errors.As(r, &k) || k != ke {
		t.Errorf("errors.As found %v, want the failure's typed error", k)
	}
	var v *viewError
	if errors.As(r, &v) {
		t.Error("errors.As found the failing rank's view through the relayed cause")
	}
	wrapped := fmt.Errorf("group broken: %w", r)
	if errors.Is(wrapped, context.DeadlineExceeded) || !errors.Is(wrapped, errSentinel) || errors.As(wrapped, &v) {
		t.Error("wrapping the relayed cause changes what it matches")
	}
}
