//go:build cgo && !novulkan

package vulkan

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

var _ backend.Importer = (*device)(nil)

// Import wraps host memory from backend.AllocHostMemory as a HostVisible
// buffer without copying (VK_EXT_external_memory_host: vkAllocateMemory
// with VkImportMemoryHostPointerInfoEXT). Devices without the extension
// return an error wrapping backend.ErrUnsupported.
func (d *device) Import(p []byte) (backend.Buffer, error) {
	if d.closed.Load() {
		return nil, d.errClosed("import")
	}
	cb, err := d.dev.ImportHost(p)
	d.syncObjects()
	if err != nil {
		return nil, fmt.Errorf("vulkan: import %d bytes of host memory: %w", len(p), err)
	}
	b := &buffer{d: d, b: cb, n: len(p), mem: backend.HostVisible}
	d.counters.Allocs.Add(1)
	d.mu.Lock()
	d.buffers[b] = struct{}{}
	d.mu.Unlock()
	if err := d.check("import"); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}
