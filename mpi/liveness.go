package mpi

import (
	"fmt"
	"strings"
	"time"
)

// The heartbeat's rule, apart from MPI (heartbeat.go sends and receives the
// heartbeats on the progress thread): which processes this process has not
// heard from for too long.
const (
	// suggestedHeartbeat is the interval docs/MPI.md suggests; without
	// GOCOLL_MPI_HEARTBEAT the heartbeat is off (docs/MPI.md says why).
	suggestedHeartbeat = time.Second
	// minHeartbeat is the shortest interval GOCOLL_MPI_HEARTBEAT takes.
	minHeartbeat = 10 * time.Millisecond
	// hbSlack is how much longer than its announced interval a process may
	// stay silent before it counts as hung: the sender's thread late, the
	// message in transit, this process's receive tested only now and then
	// (every hbCheck at most).
	hbSlack = 500 * time.Millisecond
	// hbCheckMax bounds the period at which the progress thread receives
	// heartbeats and judges the processes (a quarter of the interval, or
	// this when shorter).
	hbCheckMax = 100 * time.Millisecond
	// hbPerInterval is how many heartbeats a process sends each interval:
	// with one, a process whose thread ran only hbSlack late would count as
	// hung.
	hbPerInterval = 4
)

// parseHeartbeat reads GOCOLL_MPI_HEARTBEAT: a Go duration (at least
// minHeartbeat) for the interval, "on" for suggestedHeartbeat, "", "0" or
// "off" for none (the heartbeat off).
func parseHeartbeat(s string) (time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "off":
		return 0, nil
	case "on":
		return suggestedHeartbeat, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("GOCOLL_MPI_HEARTBEAT=%q: want a duration such as 1s or 200ms, on or off: %v", s, err)
	case d == 0:
		return 0, nil
	case d < minHeartbeat:
		return 0, fmt.Errorf("GOCOLL_MPI_HEARTBEAT=%q: want at least %v, or off", s, minHeartbeat)
	}
	return d, nil
}

// hbCheck is how often the progress thread receives heartbeats and judges
// the processes, for an interval.
func hbCheck(interval time.Duration) time.Duration { return min(interval/4, hbCheckMax) }

// liveness is what this process heard from the others, kept by the
// progress thread. Times are Unix nanoseconds of this process's clock: a
// heartbeat counts when it is received, never by the sender's clock.
//
// The rule: process p is hung when it announced an interval I (its
// heartbeats carry it; a process never heard from, or one whose heartbeat
// is off, is never judged) and nothing came from it for more than I +
// hbSlack of this process's listening. Listening means the progress
// thread's checks followed each other within gap: after a longer pause (this
// process was stopped itself, or its thread starved) the silence is counted
// again from the check that ended the pause, so that a process that was
// stopped never accuses the others of its own silence.
//
// A process that stopped at time T sent its last heartbeat before T; it is
// received by T + hbCheck at the latest, and judged hung at the first check
// after T + hbCheck + I + hbSlack: within I + hbSlack + 2 hbCheck of T (I +
// 0.7 s at most). An alive process's heartbeats (hbPerInterval per
// interval) arrive at most I/hbPerInterval + hbCheck apart, which leaves
// its thread I + hbSlack - I/hbPerInterval - hbCheck of lateness (1.15 s at
// I = 1 s) before it is wrongly judged hung.
type liveness struct {
	gap   int64   // the longest pause between checks that still counts as listening
	since int64   // when the current stretch of listening began
	last  int64   // the latest check
	seen  []int64 // per process: when its latest heartbeat was received
	every []int64 // per process: the interval it announced, 0 if none

	maxGap int64 // the longest silence of a process that ended with a heartbeat (for tests)
}

func newLiveness(size int, gap time.Duration) liveness {
	return liveness{gap: int64(gap), seen: make([]int64, size), every: make([]int64, size)}
}

// check begins a check at now, before the heartbeats received are heard.
func (l *liveness) check(now int64) {
	if l.last == 0 || now-l.last > l.gap {
		l.since = now
	}
	l.last = now
}

// heard records a heartbeat of process p announcing interval ns (0: p
// turned its heartbeat off), received at the current check.
func (l *liveness) heard(p int, interval int64) {
	if p < 0 || p >= len(l.seen) {
		return
	}
	if l.seen[p] != 0 {
		l.maxGap = max(l.maxGap, l.last-max(l.seen[p], l.since))
	}
	l.seen[p], l.every[p] = l.last, max(interval, 0)
}

// hung reports whether process p counts as hung at the latest check.
func (l *liveness) hung(p int) bool {
	if p < 0 || p >= len(l.seen) || l.every[p] == 0 {
		return false
	}
	return l.last-max(l.seen[p], l.since) > l.every[p]+int64(hbSlack)
}
