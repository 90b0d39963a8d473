// Package memory decides, in one place for every collective and every
// form, what a call may do with the memory it is handed: owners count the
// calls that use memory the library can free under them (a HostBuffer's
// pages, a Tensor) so that Close waits for them, and a call's Uses holds
// the owners it resolved until it is done; the registry finds the
// pinned host memory that holds an address and remembers the ranges of
// closed HostBuffers, so that a stale slice is refused rather than read;
// and Alias is the one rule for the overlap of a rank's send and recv.
package memory
