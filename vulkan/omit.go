//go:build !cgo || novulkan

package vulkan

import "github.com/gocoll/gocoll/backend"

func init() {
	backend.RegisterOmitted("vulkan", "left out of this build (built with -tags novulkan or CGO_ENABLED=0)", backend.PriorityVulkan)
}
