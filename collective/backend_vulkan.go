//go:build cgo && !novulkan

package collective

// Pull in the Vulkan backend (leave it out with -tags novulkan).
import _ "github.com/gocoll/gocoll/vulkan"
