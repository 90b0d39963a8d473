// Package rootcause picks the error a run of a process's ranks returns
// from the errors of the ranks that failed: the root cause, the failure
// that broke the group if it is the rank's own, else the first failure that
// does not merely report another rank's (a gone rank counting as a root
// cause only when no rank failed on its own), never an error that only
// reports another rank's failure while the root cause is known.
package rootcause

// Pick returns the root cause among errs (by rank index; order: the
// indexes of the ranks that failed, in the order they returned); nil when
// none failed. broke is the index of the rank whose failure broke the
// group (-1: none of these), derived reports whether an error only reports
// another rank's failure, and gone whether it reports a rank gone.
func Pick(errs []error, order []int, broke int, derived, gone func(error) bool) error {
	if len(order) == 0 {
		return nil
	}
	if broke >= 0 {
		if err := errs[broke]; err != nil && !derived(err) {
			return err
		}
	}
	for _, i := range order {
		if !derived(errs[i]) && !gone(errs[i]) {
			return errs[i]
		}
	}
	for _, i := range order {
		if !derived(errs[i]) {
			return errs[i]
		}
	}
	return errs[order[0]]
}
