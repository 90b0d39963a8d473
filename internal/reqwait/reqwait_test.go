package reqwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// req is a request that completes after n tests, or fails with err; it
// counts its cancels, which fail when stuck.
type req struct {
	n       int
	err     error
	cancels int
	stuck   bool
}

func (r *req) Test() (bool, error) {
	if r.err != nil {
		return false, r.err
	}
	r.n--
	return r.n <= 0, nil
}

func (r *req) Cancel() error {
	r.cancels++
	if r.stuck {
		return errors.New("in flight")
	}
	return nil
}

// TestWait: each way a wait ends, and what happens to the request and its
// buffer.
func TestWait(t *testing.T) {
	never := 1 << 60
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	broke := make(chan struct{})
	closed := make(chan struct{})
	close(closed)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		r       *req
		ctx     context.Context
		timeout time.Duration
		broke   chan struct{}
		end     End
		err     error
		cancels int
		kept    bool
	}{
		{"done", &req{n: 100}, context.Background(), time.Hour, broke, Done, nil, 0, false},
		{"failed", &req{err: boom}, context.Background(), time.Hour, broke, Failed, boom, 0, false},
		{"cancelled", &req{n: never}, cancelled, time.Hour, broke, Cancelled, nil, 1, false},
		{"broken", &req{n: never}, context.Background(), time.Hour, closed, Broken, nil, 1, false},
		{"timed out", &req{n: never}, context.Background(), 5 * time.Millisecond, broke, TimedOut, nil, 1, false},
		{"timed out, stuck", &req{n: never, stuck: true}, context.Background(), time.Millisecond, broke, TimedOut, nil, 1, true},
	} {
		held := make([]byte, 8)
		end, err := Wait(tc.ctx, tc.r, tc.timeout, tc.broke, &held)
		if end != tc.end || err != tc.err || tc.r.cancels != tc.cancels || (held == nil) != tc.kept {
			t.Errorf("%s: %v, %v, %d cancels, buffer kept by the transport %v; want %v, %v, %d, %v",
				tc.name, end, err, tc.r.cancels, held == nil, tc.end, tc.err, tc.cancels, tc.kept)
		}
	}
}

// hungReq is a request that never completes and whose peer stops
// responding after n tests (backend.HangReporter).
type hungReq struct {
	req
	hungAfter int
	tests     int
}

var errPeerHung = errors.New("peer stopped responding")

func (r *hungReq) Test() (bool, error) { r.tests++; return false, nil }

func (r *hungReq) Hung() error {
	if r.tests < r.hungAfter {
		return nil
	}
	return errPeerHung
}

// TestWaitHung: a wait on a request whose peer stopped responding ends
// with Hung and the transport's error long before its timeout, the request
// cancelled; a peer alive lets the wait run to its timeout.
func TestWaitHung(t *testing.T) {
	r := &hungReq{hungAfter: 200}
	held := make([]byte, 8)
	start := time.Now()
	end, err := Wait(context.Background(), r, time.Hour, make(chan struct{}), &held)
	if end != Hung || err != errPeerHung || r.cancels != 1 || held == nil || time.Since(start) > time.Minute {
		t.Errorf("peer hung after 200 tests: %v, %v, %d cancels, buffer kept %v; want Hung, its error, 1 cancel, buffer not kept",
			end, err, r.cancels, held == nil)
	}
	if r.tests < 200 {
		t.Errorf("the wait ended after %d tests, before the peer hung", r.tests)
	}
	alive := &hungReq{hungAfter: 1 << 60}
	end, err = Wait(context.Background(), alive, 20*time.Millisecond, make(chan struct{}), &held)
	if end != TimedOut || err != nil {
		t.Errorf("peer alive: %v, %v; want TimedOut, nil", end, err)
	}
	if got, want := Phase("exchange", errPeerHung), "exchange (peer stopped responding)"; got != want {
		t.Errorf("Phase = %q, want %q", got, want)
	}
	if got := Phase("exchange", nil); got != "exchange" {
		t.Errorf("Phase without an error = %q", got)
	}
}
