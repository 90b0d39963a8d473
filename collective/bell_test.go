package collective

import "testing"

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
