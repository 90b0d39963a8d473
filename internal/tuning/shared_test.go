package tuning

import (
	"errors"
	"sync"
	"testing"
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
