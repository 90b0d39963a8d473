package collective

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestDoorbell: a ring before the sleep ends it at once, a ring during it
// wakes the sleeper promptly, an unrung sleep lasts its slice, and none of it
// allocates.
func TestDoorbell(t *testing.T) {
	if !futexAvailable {
		t.Skip("no futex on this OS: waits park on channels")
	}
	var b doorbell
	tk := b.ticket()
	b.ring()
	start := time.Now()
	b.sleep(tk, time.Second)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("a sleep with a stale ticket lasted %v, want an immediate return", d)
	}
	start = time.Now()
	b.sleep(b.ticket(), 20*time.Millisecond)
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
				tk := b.ticket()
				mu.Lock()
				s := step
				mu.Unlock()
				if s >= i {
					break
				}
				b.sleep(tk, 10*time.Second)
			}
		}
	}()
	start = time.Now()
	for i := 1; i <= rounds; i++ {
		mu.Lock()
		step = i
		mu.Unlock()
		b.ring()
		runtime.Gosched()
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d ring-wake rounds took %v: a ring was lost (each sleep would last 10 s)", rounds, d)
	}
	if !raceEnabled {
		if a := testing.AllocsPerRun(100, func() {
			b.ring()
			b.sleep(b.ticket()-1, time.Millisecond)
		}); a != 0 {
			t.Errorf("ring and sleep: %v allocations, want 0", a)
		}
	}
}

// TestBellWaits runs collective tests with the rendezvous and exchange waits
// sleeping on doorbells, as they do on machines with cores to spare: results,
// timeouts, cancellation, breaking and zero allocations are the same.
func TestBellWaits(t *testing.T) {
	if !futexAvailable {
		t.Skip("no futex on this OS: waits park on channels")
	}
	if testing.Short() {
		t.Skip("short mode")
	}
	was := useBell.Load()
	useBell.Store(true)
	defer useBell.Store(was)
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"AllReduceRandom", TestAllReduceRandom},
		{"StrategiesZeroAllocs", TestStrategiesZeroAllocs},
		{"MissingRankTimesOut", TestMissingRankTimesOut},
		{"CommunicationTimeout", TestCommunicationTimeout},
		{"Abort", TestAbort},
		{"NewCollectivesAbsentRank", TestNewCollectivesAbsentRank},
		{"NewCollectivesCancel", TestNewCollectivesCancel},
		{"SharedTensorFailures", TestSharedTensorFailures},
		{"ShareDeviceStrategies", TestShareDeviceStrategies},
		{"AsyncDuringBreakEnds", TestAsyncDuringBreakEnds},
		{"DirectCancelledRankNotWrittenAfterReturn", TestDirectCancelledRankNotWrittenAfterReturn},
		{"Batch", TestBatch},
	} {
		t.Run(tc.name, tc.f)
	}
}
