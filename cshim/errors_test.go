package cshim

import (
	"errors"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

func TestErrorIs(t *testing.T) {
	cases := map[Status]error{
		InvalidArgument: backend.ErrInvalidArgument,
		OutOfMemory:     backend.ErrOutOfMemory,
		DeviceLost:      backend.ErrDeviceLost,
		Unsupported:     backend.ErrUnsupported,
		Timeout:         backend.ErrTimeout,
		NotReady:        backend.ErrTimeout,
		Unavailable:     backend.ErrUnavailable,
		Backend:         nil,
	}
	all := []error{backend.ErrInvalidArgument, backend.ErrOutOfMemory, backend.ErrDeviceLost, backend.ErrUnsupported,
		backend.ErrTimeout, backend.ErrUnavailable, backend.ErrClosed}
	for st, want := range cases {
		var err error = &Error{Op: "vulkan.test", Status: st, Native: -4, Msg: "vkQueueSubmit: VK_ERROR_DEVICE_LOST"}
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == want) {
				t.Errorf("errors.Is(%v error, %v) = %v", st, s, got)
			}
		}
	}
	e := &Error{Op: "vulkan.submit", Status: DeviceLost, Msg: "vkQueueSubmit: VK_ERROR_DEVICE_LOST"}
	if got, want := e.Error(), "vulkan.submit: vkQueueSubmit: VK_ERROR_DEVICE_LOST"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&Error{Op: "x", Status: Timeout}).Error(); got != "x: timeout" {
		t.Errorf("Error() without message = %q", got)
	}
	if Status(42).String() != "Status(42)" || Unavailable.String() != "unavailable" {
		t.Error("Status.String")
	}
}
