package bufpool

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
)

// A buffer grows with headroom, is reused while large enough, and starts
// at MinBytes.
func TestEnsure(t *testing.T) {
	dev, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var b backend.Buffer
	if err := Ensure(dev, &b, 10, backend.HostVisible); err != nil {
		t.Fatal(err)
	}
	if b.Len() != MinBytes {
		t.Fatalf("a small buffer holds %d bytes, want %d", b.Len(), MinBytes)
	}
	first := b
	if err := Ensure(dev, &b, MinBytes, backend.HostVisible); err != nil || b != first {
		t.Fatalf("a buffer large enough was not reused (%v)", err)
	}
	if err := Ensure(dev, &b, 8000, backend.DeviceLocal); err != nil {
		t.Fatal(err)
	}
	if b == first || b.Len() != 10000 {
		t.Fatalf("grown to %d bytes, want 10000 (8000 and a quarter)", b.Len())
	}
	b.Close()
}

// Close closes the allocated buffers, skips the ones never allocated, and
// leaves every one nil.
func TestClose(t *testing.T) {
	dev, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var a, b, none backend.Buffer
	if err := Ensure(dev, &a, 10, backend.HostVisible); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(dev, &b, 10, backend.DeviceLocal); err != nil {
		t.Fatal(err)
	}
	if errs := Close(&a, &none, &b); len(errs) != 0 {
		t.Fatalf("Close: %v", errs)
	}
	if a != nil || b != nil || none != nil {
		t.Fatalf("Close left %v, %v, %v; want every buffer nil", a, b, none)
	}
}
