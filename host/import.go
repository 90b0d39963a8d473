package host

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

var _ backend.Importer = (*Device)(nil)

// Import wraps host memory p as a HostVisible buffer without copying: the
// host backend's buffers are host memory already. p must outlive the
// buffer; closing the buffer does not free p.
func (d *Device) Import(p []byte) (backend.Buffer, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("host: import: empty memory: %w", backend.ErrInvalidArgument)
	}
	d.counters.Allocs.Add(1)
	d.counters.ObjectsCreated.Add(1)
	return &buffer{dev: d, mem: backend.HostVisible, data: p[:len(p):len(p)]}, nil
}
