package backend

// Importer is implemented by devices that can use host memory that gocoll
// allocated itself (AllocHostMemory) directly, with no copy: the memory is
// imported once (VK_EXT_external_memory_host, Metal's
// newBufferWithBytesNoCopy) and then read and written by DMA and kernels.
type Importer interface {
	// Import wraps p as a HostVisible buffer. p must come from
	// AllocHostMemory (page-aligned, a whole number of pages) and outlive
	// the buffer. Devices that cannot import return an error wrapping
	// ErrUnsupported.
	Import(p []byte) (Buffer, error)
}
