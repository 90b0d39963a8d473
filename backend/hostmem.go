package backend

// Importer is implemented by devices that can use host memory that gocoll
// allocated itself (AllocHostMemory) directly, with no copy: the memory is
// imported once (VK_EXT_external_memory_host, Metal's
// newBufferWithBytesNoCopy) and then read and written by DMA and kernels.
type Importer interface {
	// Import wraps p as a HostVisible buffer. p must be page-aligned, a
	// whole number of pages, and outlive the buffer at the same pages:
	// memory from AllocHostMemory, or Go heap memory pinned with a
	// runtime.Pinner while the buffer lives. Devices that cannot import, or only into memory that is
	// not host-coherent, return an error wrapping ErrUnsupported.
	//
	// The buffer's Close returns once no device work uses p any more (it
	// waits for submitted work, up to the device's drain limit), so p may be
	// freed then. An error wrapping ErrDeviceLost from that Close means the
	// device could not be drained: p must then be leaked, never freed.
	Import(p []byte) (Buffer, error)
}
