package cshim

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

// Status is a gc_status code of the C ABI (shim.h).
type Status int32

// Status codes; the values are those of shim.h's GC_* constants.
const (
	OK              Status = 0 // GC_OK
	InvalidArgument Status = 1 // GC_INVALID_ARGUMENT: a bad argument; nothing was done
	OutOfMemory     Status = 2 // GC_OUT_OF_MEMORY: host or device memory exhausted
	DeviceLost      Status = 3 // GC_DEVICE_LOST: the device is lost; only Close works
	Unsupported     Status = 4 // GC_UNSUPPORTED: the device or driver lacks a feature
	Timeout         Status = 5 // GC_TIMEOUT: a wait with a timeout expired
	Backend         Status = 6 // GC_BACKEND: any other API failure
	NotReady        Status = 7 // GC_NOT_READY: a poll found the work not done
	Unavailable     Status = 8 // GC_UNAVAILABLE: the API library could not be loaded or initialised
)

var statusNames = [...]string{
	OK:              "ok",
	InvalidArgument: "invalid argument",
	OutOfMemory:     "out of memory",
	DeviceLost:      "device lost",
	Unsupported:     "unsupported",
	Timeout:         "timeout",
	Backend:         "backend failure",
	NotReady:        "not ready",
	Unavailable:     "unavailable",
}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int32(s))
}

// sentinel returns the backend sentinel a status stands for, or nil.
func (s Status) sentinel() error {
	switch s {
	case InvalidArgument:
		return backend.ErrInvalidArgument
	case OutOfMemory:
		return backend.ErrOutOfMemory
	case DeviceLost:
		return backend.ErrDeviceLost
	case Unsupported:
		return backend.ErrUnsupported
	case Timeout, NotReady:
		return backend.ErrTimeout
	case Unavailable:
		return backend.ErrUnavailable
	}
	return nil
}

// Error is a failed ABI call.
type Error struct {
	Op     string // the implementation and ABI entry, e.g. "vulkan.buffer_create"
	Status Status
	Native int32  // the API's own result code (a VkResult), 0 if none applies
	Msg    string // the C side's message, naming the API call that failed
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s: %v", e.Op, e.Status)
	}
	return fmt.Sprintf("%s: %s", e.Op, e.Msg)
}

// Is reports whether target is the backend sentinel for e's status:
// backend.ErrInvalidArgument, ErrOutOfMemory, ErrDeviceLost, ErrUnsupported,
// ErrTimeout (for Timeout and NotReady) or ErrUnavailable.
func (e *Error) Is(target error) bool {
	s := e.Status.sentinel()
	return s != nil && s == target
}
