package backend

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeBackend is a registered backend with a name and priority only.
type fakeBackend struct {
	name string
	prio int
}

func (f fakeBackend) Name() string                          { return f.name }
func (f fakeBackend) Priority() int                         { return f.prio }
func (f fakeBackend) Available() error                      { return nil }
func (f fakeBackend) Devices() ([]DeviceInfo, error)        { return nil, nil }
func (f fakeBackend) Open(int, OpenOptions) (Device, error) { return nil, ErrUnsupported }

// TestRegistryPriority: the automatic choice's order (Preference) is by
// priority from the highest down, ties by name, with the backends left out
// of the build among them where they would have run and without the
// negative priorities; Known lists every one; Lookup of one left out says
// why.
func TestRegistryPriority(t *testing.T) {
	regMu.Lock()
	savedReg, savedOm := registry, omitted
	registry, omitted = map[string]Backend{}, map[string]omission{}
	regMu.Unlock()
	t.Cleanup(func() {
		regMu.Lock()
		registry, omitted = savedReg, savedOm
		regMu.Unlock()
	})
	Register(fakeBackend{"host", PriorityHost})
	Register(fakeBackend{"vulkan", PriorityVulkan})
	Register(fakeBackend{"faulty", -1})
	Register(fakeBackend{"b-gpu", PriorityVulkan})
	RegisterOmitted("metal", "left out for the test", PriorityMetal)
	RegisterOmitted("elsewhere", "exists only on another OS", -1)

	if got, want := Preference(), []string{"metal", "b-gpu", "vulkan", "host"}; !slices.Equal(got, want) {
		t.Errorf("Preference() = %v, want %v", got, want)
	}
	if got, want := Known(), []string{"metal", "b-gpu", "vulkan", "host", "elsewhere", "faulty"}; !slices.Equal(got, want) {
		t.Errorf("Known() = %v, want %v", got, want)
	}
	if got, want := Names(), []string{"b-gpu", "faulty", "host", "vulkan"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	_, err := Lookup("metal")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "left out for the test") {
		t.Errorf("Lookup(metal) = %v, want ErrUnavailable saying why", err)
	}
	if b, err := Lookup("faulty"); err != nil || b.Priority() != -1 {
		t.Errorf("Lookup(faulty) = %v, %v: a negative priority is still chosen by name", b, err)
	}
	// Registering a backend that was recorded as left out (a test build)
	// lists it once, at its registered priority.
	Register(fakeBackend{"metal", 1})
	if got, want := Preference(), []string{"b-gpu", "vulkan", "metal", "host"}; !slices.Equal(got, want) {
		t.Errorf("after registering metal: Preference() = %v, want %v", got, want)
	}
}
