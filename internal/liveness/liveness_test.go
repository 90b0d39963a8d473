package liveness

import (
	"testing"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A rank goes once: its mark stays, the count and the events move, and the
// alert taken before closes; Run's marks are forgotten, others are not.
func TestBoard(t *testing.T) {
	var b Board
	b.Init()
	var r, s Rank
	alert := b.Alert()
	if !b.Go(&r, &Mark{Reason: "returned", Seq: 3, FromRun: true}) || b.Go(&r, &Mark{Reason: "closed"}) {
		t.Fatal("a rank goes exactly once")
	}
	if !closed(alert) || closed(b.Alert()) || !b.Any() || b.Events() != 1 || r.Mark().Reason != "returned" {
		t.Fatalf("after one rank went: alert %v, Any %v, Events %d, mark %+v", closed(alert), b.Any(), b.Events(), r.Mark())
	}
	b.Go(&s, &Mark{Reason: "closed"})
	b.Forget(&r)
	b.Forget(&s)
	if r.Mark() != nil || s.Mark() == nil || !b.Any() || b.Events() != 2 {
		t.Fatalf("Forget: marks %v, %v; Any %v; Events %d", r.Mark(), s.Mark(), b.Any(), b.Events())
	}
	b.Break()
	b.Break()
	var u Rank
	b.Go(&u, &Mark{})
	if !closed(b.Alert()) {
		t.Fatal("the alert stays closed once the group broke")
	}
}

// The watch reports the pending waits at each interval, and ends when none
// is left (then a wait may claim it again) or the group breaks.
func TestWatch(t *testing.T) {
	var w Watchdog
	if !w.Claim() || w.Claim() {
		t.Fatal("one watch at a time")
	}
	left := 2
	var reported []int
	Watch(&w, time.Millisecond, nil, func() []int {
		if left == 0 {
			return nil
		}
		left--
		return []int{left}
	}, func(p int) { reported = append(reported, p) })
	if len(reported) != 2 || reported[0] != 1 || reported[1] != 0 {
		t.Fatalf("reported %v", reported)
	}
	if !w.Claim() {
		t.Fatal("the watch ended: the next wait claims it")
	}
	broken := make(chan struct{})
	close(broken)
	Watch(&w, time.Hour, broken, func() []int { return []int{1} }, func(int) { t.Error("reported after the break") })
	if !w.Claim() {
		t.Fatal("the watch ended with the break")
	}
}
