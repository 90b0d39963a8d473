package subgroups

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// kid is a sub-group that counts its closes.
type kid struct {
	name   string
	closes atomic.Int32
	err    error
}

func (k *kid) Close() error {
	k.closes.Add(1)
	return k.err
}

// TestJoinOnce: the members of one sub-group get the one their first made;
// the set keeps it, and drops the entry after the last member left.
func TestJoinOnce(t *testing.T) {
	var s Set[*kid]
	const users = 4
	var made atomic.Int32
	got := make([]*kid, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, ctxErr, ok := s.Join(context.Background(), 1, 3, users, func() (*kid, error) {
				made.Add(1)
				return &kid{name: "a"}, nil
			})
			if !ok || ctxErr != nil || e.Err != nil {
				t.Errorf("Join = %v, %v, %v", ok, ctxErr, e.Err)
				return
			}
			got[i] = e.Val
		}()
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Fatalf("made %d times, want once", made.Load())
	}
	for _, k := range got {
		if k != got[0] {
			t.Fatalf("members got different sub-groups: %v", got)
		}
	}
	if l := s.List(); len(l) != 1 || l[0] != got[0] {
		t.Fatalf("List = %v, want the one made", l)
	}
	if n := s.Entries(); n != 0 {
		t.Fatalf("Entries = %d after every member left", n)
	}
}

// TestJoinFailedAddsNothing: a sub-group whose making failed is not kept,
// and every member gets the error.
func TestJoinFailedAddsNothing(t *testing.T) {
	var s Set[*kid]
	boom := errors.New("boom")
	e, _, ok := s.Join(context.Background(), 1, 0, 1, func() (*kid, error) { return nil, boom })
	if !ok || e.Err != boom {
		t.Fatalf("Join = %v, %v", ok, e.Err)
	}
	if l := s.List(); len(l) != 0 {
		t.Fatalf("List = %v, want none", l)
	}
}

// TestJoinProcessAddsInColorOrder: a process's part adds its sub-groups in
// ascending color order, skipping colors without one here.
func TestJoinProcessAddsInColorOrder(t *testing.T) {
	var s Set[*kid]
	a, b, c := &kid{name: "a"}, &kid{name: "b"}, &kid{name: "c"}
	e, ctxErr, ok := s.JoinProcess(context.Background(), 5, 1, func() (map[int]*kid, error) {
		return map[int]*kid{7: c, 0: a, 2: b, 4: nil}, nil
	})
	if !ok || ctxErr != nil || e.Err != nil || len(e.Val) != 4 {
		t.Fatalf("JoinProcess = %v, %v, %v", ok, ctxErr, e)
	}
	if l := s.List(); !slices.Equal(l, []*kid{a, b, c}) {
		t.Fatalf("List = %v, want a, b, c", l)
	}
}

// TestWaitEndsWithCtx: a member whose ctx ends while the sub-group is being
// made gets ctx's error; the set still keeps what was made.
func TestWaitEndsWithCtx(t *testing.T) {
	var s Set[*kid]
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Join(context.Background(), 1, 0, 2, func() (*kid, error) {
			close(started)
			<-release
			return &kid{}, nil
		})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, ctxErr, ok := s.Join(ctx, 1, 0, 2, nil); !ok || !errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Fatalf("Join with an ended ctx = %v, %v", ok, ctxErr)
	}
	close(release)
	<-done
	if n := len(s.List()); n != 1 {
		t.Fatalf("List has %d, want 1", n)
	}
}

// TestStopAndClose: after Stop no join is made; Close waits for the ones
// being made, closes every sub-group once, returns their errors and drops
// the entries of Splits some members never reached.
func TestStopAndClose(t *testing.T) {
	var s Set[*kid]
	boom := errors.New("boom")
	done := &kid{name: "done", err: boom}
	s.Join(context.Background(), 1, 0, 1, func() (*kid, error) { return done, nil })
	release := make(chan struct{})
	started := make(chan struct{})
	slow := &kid{name: "slow"}
	go s.Join(context.Background(), 2, 0, 1, func() (*kid, error) {
		close(started)
		<-release
		return slow, nil
	})
	<-started
	// A Split one of whose two members never came.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Join(ctx, 3, 0, 2, func() (*kid, error) { return &kid{name: "half"}, nil })
	if n := s.Entries(); n != 2 {
		t.Fatalf("Entries = %d, want the slow one's and the half-joined one's", n)
	}
	s.Stop()
	if _, _, ok := s.Join(context.Background(), 4, 0, 1, func() (*kid, error) {
		t.Error("made after Stop")
		return nil, nil
	}); ok {
		t.Fatal("Join after Stop: ok")
	}
	closed := make(chan []error)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a sub-group was being made")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	errs := <-closed
	if len(errs) != 1 || errs[0] != boom {
		t.Fatalf("Close = %v, want [boom]", errs)
	}
	if done.closes.Load() != 1 || slow.closes.Load() != 1 {
		t.Fatalf("closes: done %d, slow %d, want 1 each", done.closes.Load(), slow.closes.Load())
	}
	if n := s.Entries(); n != 0 {
		t.Fatalf("Entries = %d after Close", n)
	}
	if l := s.List(); len(l) != 0 {
		t.Fatalf("List after Close = %v", l)
	}
}
