// Package collective runs collective operations (all-reduce, and the rest as
// they arrive) across the ranks of a Group, on whichever compute backend is
// available: Metal, Vulkan, or the pure-Go host backend.
//
// A Group opens one logical device per rank. Each rank calls the collective
// from its own goroutine with its own Comm, as with NCCL; the call returns
// when the rank's result is ready. Arguments are checked at the entry point
// and every rank's call is compared (a fingerprint of collective, op, type,
// count) before any data moves, so mismatched calls fail with ErrMismatch
// on every rank instead of hanging or corrupting data. Waits honour the
// caller's context and Config.CommunicationTimeout; a rank that never
// arrives makes the others fail with ErrTimeout naming it, and the group is
// then broken (later calls fail fast with the original cause).
//
// Reductions run in the backend's kernels: f32 in f32 and f64 in f64 (never
// rounded through f32; a device without f64 reduces f64 exactly on the host).
// Mean is the sum followed by one multiply by 1/N. NaN and Inf propagate; max
// and min follow IEEE 754-2019 (NaN wins, -0 < +0). Every rank ends with
// bitwise identical data.
//
// Backend selection: Options.Backend, else the environment variable
// GOCOLL_BACKEND, else metal (darwin), vulkan, host. Build tags novulkan and
// nometal leave a backend out; CGO_ENABLED=0 builds keep the host backend.
// GOCOLL_DEBUG=INFO logs the backend, placement and each call's algorithm.
package collective
