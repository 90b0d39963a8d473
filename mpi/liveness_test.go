package mpi

import (
	"testing"
	"time"
)

// TestParseHeartbeat: GOCOLL_MPI_HEARTBEAT's values, and the bad ones
// refused.
func TestParseHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true}, {"on", suggestedHeartbeat, true}, {"0", 0, true}, {"off", 0, true}, {"OFF", 0, true}, {"0s", 0, true},
		{"200ms", 200 * time.Millisecond, true}, {"2s", 2 * time.Second, true}, {"10ms", 10 * time.Millisecond, true},
		{"9ms", 0, false}, {"-1s", 0, false}, {"1", 0, false}, {"soon", 0, false},
	} {
		got, err := parseHeartbeat(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseHeartbeat(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestLiveness plays the rule on a simulated clock: checks every hbCheck,
// peers sending every interval (one stops at a known time, one sleeps in
// its program but keeps beating, one never beats), and this process itself
// stopped for a while. The stopped peer must be judged hung within interval
// + hbSlack + 2 hbCheck of its stop and not before interval + hbSlack of
// silence; the others never.
func TestLiveness(t *testing.T) {
	for _, interval := range []time.Duration{200 * time.Millisecond, time.Second, 10 * time.Second} {
		check := hbCheck(interval)
		const (
			me, stops, alive, silent, late = 0, 1, 2, 3, 4
			size                           = 5
		)
		l := newLiveness(size, check+hbSlack/2)
		ms := func(d time.Duration) int64 { return int64(d) }
		stopAt := ms(3*interval + interval/3)                         // process 1 stops (SIGSTOP)
		selfFrom, selfTo := ms(interval/2), ms(interval/2+2*interval) // this process is stopped itself, before
		lateFrom := ms(interval)                                      // process 4 joins late: its first heartbeat
		var judged int64 = -1
		// Heartbeats in flight: sent at their sender's ticks, received at
		// the first check not earlier (nothing is lost while this process
		// is stopped: MPI queues them).
		type beat struct {
			from int
			at   int64
		}
		var inflight []beat
		nextSend := [size]int64{}
		end := stopAt + ms(interval+hbSlack+4*check)
		for now := int64(0); now <= end; now += ms(check) / 8 {
			for p := range size {
				if p == me || p == silent || p == late && now < lateFrom || p == stops && now >= stopAt {
					continue
				}
				if now >= nextSend[p] {
					inflight = append(inflight, beat{p, now})
					nextSend[p] = now + ms(interval)
				}
			}
			if now >= selfFrom && now < selfTo || now%ms(check) != 0 {
				continue // this process checks every check, unless stopped
			}
			l.check(now)
			kept := inflight[:0]
			for _, b := range inflight {
				if b.at <= now {
					l.heard(b.from, int64(interval))
				} else {
					kept = append(kept, b)
				}
			}
			inflight = kept
			for _, p := range []int{alive, silent, late} {
				if l.hung(p) {
					t.Fatalf("interval %v: process %d judged hung at %v", interval, p, time.Duration(now))
				}
			}
			if l.hung(stops) && judged < 0 {
				judged = now
			}
			if l.hung(me) {
				t.Fatalf("interval %v: this process judged itself hung", interval)
			}
		}
		switch {
		case judged < 0:
			t.Errorf("interval %v: the process stopped at %v never judged hung", interval, time.Duration(stopAt))
		case judged-stopAt > ms(interval+hbSlack+2*check):
			t.Errorf("interval %v: judged hung %v after it stopped; want within %v", interval,
				time.Duration(judged-stopAt), interval+hbSlack+2*check)
		case judged-stopAt < ms(hbSlack):
			t.Errorf("interval %v: judged hung %v after it stopped: too soon", interval, time.Duration(judged-stopAt))
		}
		if interval <= time.Second && judged-stopAt > ms(interval+time.Second) {
			t.Errorf("interval %v: reported %v after the stop, beyond the interval plus 1 s", interval, time.Duration(judged-stopAt))
		}
	}
}

// TestLivenessSelfStop: after this process was stopped longer than a peer's
// interval, nobody is judged hung at once, even a peer whose heartbeats are
// all older than the pause; a peer that stays silent is judged after
// interval + hbSlack of listening.
func TestLivenessSelfStop(t *testing.T) {
	const interval = int64(200 * time.Millisecond)
	check := int64(hbCheck(200 * time.Millisecond))
	l := newLiveness(2, time.Duration(check)+hbSlack/2)
	l.check(0)
	l.heard(1, interval)
	resume := 10 * interval // stopped from just after 0 until resume
	l.check(resume)
	if l.hung(1) {
		t.Fatal("peer judged hung at the first check after this process's own pause")
	}
	var at int64 = -1
	for now := resume + check; now < resume+10*interval; now += check {
		l.check(now)
		if l.hung(1) {
			at = now
			break
		}
	}
	if want := resume + interval + int64(hbSlack); at <= want-check || at > want+check {
		t.Errorf("silent peer judged hung at %v; want about %v", time.Duration(at), time.Duration(want))
	}
	// A heartbeat announcing 0 (off) stops the judging.
	l.heard(1, 0)
	l.check(at + 100*interval)
	if l.hung(1) {
		t.Error("a peer whose heartbeat is off judged hung")
	}
}
