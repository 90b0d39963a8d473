package collective

// The host backend is always built: it is the reference and the fallback.
import _ "github.com/gocoll/gocoll/host"
