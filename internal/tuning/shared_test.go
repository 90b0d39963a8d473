package tuning

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// A Shared model is measured once, whoever asks first; the others wait
// for it and read the same constants.
func TestSharedOnce(t *testing.T) {
	var s Shared
	if s.Done() {
		t.Fatal("Done before any measurement")
	}
	var mu sync.Mutex
	runs := 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := s.Measure(func(m *Model) {
				mu.Lock()
				runs++
				mu.Unlock()
				m.Submit, m.Err = 1e-5, errors.New("partial")
			})
			if !got.Done() || got.Submit != 1e-5 || got.Err == nil {
				t.Errorf("after Measure: done %v, model %+v", got.Done(), got.Model)
			}
		}()
	}
	wg.Wait()
	if runs != 1 {
		t.Fatalf("measured %d times, want once", runs)
	}
	attrs := s.LogAttrs()
	if len(attrs)%2 != 0 || attrs[0] != "submit_us" || attrs[1] != 10.0 {
		t.Fatalf("LogAttrs: %v", attrs)
	}
}

// MeasureOnce measures a group's model on its device with its slots and
// links, once; a sub-group takes over its parent's model with its own
// slots and links, unless the parent's failed; a measurement past its
// timeout fails.
func TestMeasureOnce(t *testing.T) {
	dev := openHost(t)
	var parent Shared
	set := Setup{Dev: dev, SlotBytes: 1 << 20, Links: LinksShared, Timeout: time.Minute}
	parent.MeasureOnce(set)
	if !parent.Done() || parent.Err != nil || parent.Submit <= 0 || parent.SlotBytes != 1<<20 || parent.Links != LinksShared || parent.Measured <= 0 {
		t.Fatalf("parent: done %v, model %+v", parent.Done(), parent.Model)
	}
	var sub Shared
	sub.MeasureOnce(Setup{Dev: dev, SlotBytes: 4096, Links: LinksCopied, Timeout: time.Minute, Parent: func() *Shared { return &parent }})
	if sub.Submit != parent.Submit || sub.SlotBytes != 4096 || sub.Links != LinksCopied || sub.Measured != 0 {
		t.Fatalf("sub-group: model %+v, want the parent's (%+v) with its own slots and links, not measured", sub.Model, parent.Model)
	}
	failed := Shared{}
	failed.Measure(func(m *Model) { m.Err = errors.New("no device") })
	var orphan Shared
	orphan.MeasureOnce(Setup{Dev: dev, SlotBytes: 4096, Timeout: time.Minute, Parent: func() *Shared { return &failed }})
	if orphan.Err != nil || orphan.Measured <= 0 {
		t.Fatalf("a sub-group whose parent's model failed: model %+v, want its own measurement", orphan.Model)
	}
	var late Shared
	late.MeasureOnce(Setup{Dev: dev, Timeout: time.Nanosecond})
	if late.Err == nil {
		t.Fatal("a measurement past its timeout succeeded")
	}
	late.MeasureOnce(set)
	if late.Err == nil {
		t.Fatal("measured twice")
	}
}
