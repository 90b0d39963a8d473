package collective

import (
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hooks"
)

func init() {
	hooks.AutoChoice = func(comm any, bytes int, dt backend.DType) (int, map[int]time.Duration) {
		s, est := comm.(*Comm).autoChoice(bytes, dt)
		out := make(map[int]time.Duration, len(est))
		for k, v := range est {
			out[int(k)] = v
		}
		return int(s), out
	}
}
