package bell

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestBell: a ring before the sleep ends it at once, a ring during it
// wakes the sleeper promptly, an unrung sleep lasts its slice, and none of it
// allocates.
func TestBell(t *testing.T) {
	if !Available {
		t.Skip("no futex on this OS: waits park on channels")
	}
	var b Bell
	tk := b.Ticket()
	b.Ring()
	start := time.Now()
	b.Sleep(tk, time.Second)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("a sleep with a stale ticket lasted %v, want an immediate return", d)
	}
	start = time.Now()
	b.Sleep(b.Ticket(), 20*time.Millisecond)
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("an unrung 20 ms sleep returned after %v", d)
	}
	// A sleeper woken by a ring from another goroutine, many times over.
	var wg sync.WaitGroup
	const rounds = 200
	var mu sync.Mutex
	step := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= rounds; i++ {
			for {
				tk := b.Ticket()
				mu.Lock()
				s := step
				mu.Unlock()
				if s >= i {
					break
				}
				b.Sleep(tk, 10*time.Second)
			}
		}
	}()
	start = time.Now()
	for i := 1; i <= rounds; i++ {
		mu.Lock()
		step = i
		mu.Unlock()
		b.Ring()
		runtime.Gosched()
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d ring-wake rounds took %v: a ring was lost (each sleep would last 10 s)", rounds, d)
	}
	if !raceEnabled {
		if a := testing.AllocsPerRun(100, func() {
			b.Ring()
			b.Sleep(b.Ticket()-1, time.Millisecond)
		}); a != 0 {
			t.Errorf("ring and sleep: %v allocations, want 0", a)
		}
	}
}

// TestRingWithoutSleepers: a ring with nobody asleep only moves the
// ticket on, so a sleep with the old ticket returns at once.
func TestRingWithoutSleepers(t *testing.T) {
	var b Bell
	tk := b.Ticket()
	b.Ring()
	if b.Ticket() == tk {
		t.Fatal("Ring left the ticket unchanged")
	}
	if b.sleepers.Load() != 0 {
		t.Fatalf("%d sleepers on an idle bell", b.sleepers.Load())
	}
}
