// Package bufpool grows a rank's pooled device buffers on demand: a buffer
// too small for a call is closed and allocated again, with headroom, so a
// slowly growing size does not allocate on each call, and a buffer large
// enough is reused as it is; Close frees them when the rank closes.
// Scratch does the same for a rank's per-call scratch slices.
package bufpool

import "github.com/gocoll/gocoll/backend"

// MinBytes is the smallest buffer Ensure allocates.
const MinBytes = 4096

// Ensure makes *b a buffer of dev in memory where holding at least n
// bytes: it keeps *b if it is large enough, else closes it and allocates
// n + n/4 bytes (at least MinBytes), or exactly n if that fails. On an
// error *b is nil or the old buffer (when closing it failed).
func Ensure(dev backend.Device, b *backend.Buffer, n int, where backend.Memory) error {
	if *b != nil && (*b).Len() >= n {
		return nil
	}
	if *b != nil {
		if err := (*b).Close(); err != nil {
			return err
		}
		*b = nil
	}
	size := max(n+n/4, MinBytes)
	nb, err := dev.Alloc(size, where)
	if err != nil {
		// Retry at the exact size before giving up.
		if nb, err = dev.Alloc(n, where); err != nil {
			return err
		}
	}
	*b = nb
	return nil
}

// Close closes each of the pooled buffers bs that is allocated and leaves
// it nil; it returns the errors of the closes that failed.
func Close(bs ...*backend.Buffer) []error {
	var errs []error
	for _, b := range bs {
		if *b != nil {
			if err := (*b).Close(); err != nil {
				errs = append(errs, err)
			}
			*b = nil
		}
	}
	return errs
}

// Scratch returns (*s)[:n], growing *s to n first (its old contents are
// not kept when it grows): per-call scratch that grows once and is then
// reused.
func Scratch[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	return (*s)[:n]
}
