package hang

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/liveness"

	"github.com/gocoll/gocoll/internal/waitrec"
)

// fake is a process of three ranks (global 10, 11, 12): rank 11 never came
// to the rendezvous, rank 12 is gone, and rank 13 is another process's.
type fake struct {
	recs   [3]waitrec.Record
	gen    uint64 // the rendezvous's current generation
	p2p    []int  // rank 2's unmatched peers
	absent []int
}

func (f *fake) Ranks() int                          { return 3 }
func (f *fake) Record(i int) (int, *waitrec.Record) { return 10 + i, &f.recs[i] }
func (f *fake) Absent(gen uint64, m []int) ([]int, bool) {
	if gen != f.gen {
		return m, true
	}
	return append(m, f.absent...), false
}
func (f *fake) Unmatched(i int, m []int) ([]int, string) {
	if len(f.p2p) == 0 {
		return m, ""
	}
	return append(m, f.p2p...), "Send to rank 13: no matching Recv"
}
func (f *fake) Where(r int) (int64, string) {
	switch r {
	case 11:
		return 0, ""
	case 12:
		return 4, "returned"
	}
	return -1, ""
}

// Pending reports each waiting rank with the ranks it waits for and where
// they are; a rank whose rendezvous completed or whose operations matched
// is on its way out and not reported.
func TestPending(t *testing.T) {
	f := &fake{gen: 7, absent: []int{11}, p2p: []int{13}}
	f.recs[0].Begin("AllReduce", "rendezvous", 5, false, waitrec.Barrier, 7)
	f.recs[1].Begin("AllReduce", "reduce", 5, false, 12, 0)
	f.recs[2].Begin("Send", "", 2, true, waitrec.P2P, 0)
	got := Pending(f)
	if len(got) != 3 {
		t.Fatalf("%d waits, want 3: %v", len(got), got)
	}
	for i, want := range []struct {
		rank    int
		missing []int
		last    []int64
		gone    []string
		says    string
	}{
		{10, []int{11}, []int64{0}, []string{""}, "rank 11 (no call yet)"},
		{11, []int{12}, []int64{4}, []string{"returned"}, "rank 12 (gone: returned)"},
		{12, []int{13}, []int64{-1}, []string{""}, "(point-to-point call #2), Send to rank 13: no matching Recv, for rank 13"},
	} {
		p := got[i]
		if p.Rank != want.rank || !slices.Equal(p.Missing, want.missing) || !slices.Equal(p.LastSeq, want.last) || !slices.Equal(p.Gone, want.gone) {
			t.Fatalf("wait %d = %+v, want rank %d missing %v (last %v, gone %v)", i, p, want.rank, want.missing, want.last, want.gone)
		}
		if s := p.String(); !strings.Contains(s, want.says) || !strings.HasPrefix(s, "rank ") {
			t.Fatalf("wait %d says %q, want it to say %q", i, s, want.says)
		}
	}

	f.gen, f.p2p = 8, nil
	f.recs[1].End()
	if got := Pending(f); len(got) != 0 {
		t.Fatalf("after the rendezvous completed and the operations matched: %v, want none", got)
	}
}

// Log logs a wait that lasts, with its diagnosis, until broken is closed.
func TestLog(t *testing.T) {
	f := &fake{gen: 7, absent: []int{11}}
	f.recs[0].Begin("AllReduce", "rendezvous", 5, false, waitrec.Barrier, 7)
	var buf syncBuf
	l := slog.New(slog.NewTextHandler(&buf, nil))
	var w liveness.Watchdog
	if !w.Claim() {
		t.Fatal("a new watchdog is running")
	}
	broken := make(chan struct{})
	done := make(chan struct{})
	go func() {
		Log(&w, 5*time.Millisecond, broken, f, l)
		close(done)
	}()
	for !strings.Contains(buf.String(), "rank 11 (no call yet)") {
		time.Sleep(time.Millisecond)
	}
	close(broken)
	<-done
}

// syncBuf is a bytes.Buffer safe for one writer and one reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
