//go:build cgo && !novulkan

package ddp

import (
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/vulkan"
)

const vulkanBuilt = true

func init() {
	// The instance is created once per process: ask for validation before
	// anything loads Vulkan, unless GOCOLL_VULKAN_VALIDATION=0 asks for
	// figures without it.
	if os.Getenv("GOCOLL_VULKAN_LIB") == "" && os.Getenv("GOCOLL_VULKAN_VALIDATION") != "0" {
		os.Setenv("GOCOLL_VULKAN_VALIDATION", "1")
	}
}

// checkValidation fails the test on any validation-layer message.
func checkValidation(t testing.TB) {
	if msgs := vulkan.ValidationMessages(); len(msgs) > 0 {
		t.Errorf("Vulkan validation layer reported %d message(s):\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}
