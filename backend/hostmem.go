package backend

// Importer is implemented by devices that can use host memory that gocoll
// allocated itself (AllocHostMemory) directly, with no copy: the memory is
// imported once (VK_EXT_external_memory_host, Metal's
// newBufferWithBytesNoCopy) and then read and written by DMA and kernels.
type Importer interface {
	// Import wraps p as a HostVisible buffer. p must be page-aligned, a
	// whole number of pages, and mapped at the same pages while the buffer
	// lives: memory from AllocHostMemory, or Go heap memory (never
	// unmapped), whose object the caller keeps alive while device work uses
	// the buffer (collective's import cache: imported Go slices). The
	// Vulkan and Metal buffers hold p's address, not a pointer: they do not
	// keep a Go object alive. Devices that cannot import, or only into
	// memory that is not host-coherent, return an error wrapping
	// ErrUnsupported.
	//
	// The buffer's Close returns once no device work uses p any more (it
	// waits for submitted work, up to the device's drain limit), so p may be
	// freed then. An error wrapping ErrDeviceLost from that Close means the
	// device could not be drained: p must then be leaked, never freed.
	Import(p []byte) (Buffer, error)
}
