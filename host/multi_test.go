package host_test

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

func TestReduceMulti(t *testing.T) {
	backendtest.RunMulti(t, func(t *testing.T, opts backend.OpenOptions) backend.Device { return open(t, opts) })
}
