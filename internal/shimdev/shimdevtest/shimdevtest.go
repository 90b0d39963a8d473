//go:build cgo

// Package shimdevtest holds what the tests of the backends built on package
// shimdev share.
package shimdevtest

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/shimdev"
)

// Open opens device 0 of b with opts for the test and closes it when the
// test ends, failing the test if either fails.
func Open(t testing.TB, b backend.Backend, opts backend.OpenOptions) *shimdev.Device {
	t.Helper()
	d, err := b.Open(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d.(*shimdev.Device)
}
