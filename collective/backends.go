package collective

// The backends. Host is always built: it is the reference and the fallback.
// Metal and Vulkan are built where their build constraints allow (metal:
// darwin with cgo, not -tags nometal; vulkan: cgo, not -tags novulkan);
// otherwise their packages only record why they were left out, which
// selection and diag report.
import (
	_ "github.com/gocoll/gocoll/host"
	_ "github.com/gocoll/gocoll/metal"
	_ "github.com/gocoll/gocoll/vulkan"
)
