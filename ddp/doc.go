// Package ddp is gocoll's data-parallel training layer, over package
// collective: a Sync per rank averages gradients across the ranks of a
// collective.Group every step.
//
// What it adds to a plain collective.AllReduce(ctx, c, grads, collective.Mean):
//
//   - Reproducible by default: with the group's strategy Auto (the
//     default), the dense all-reduce and the adaptive selector only use
//     strategies whose reduction order is rank order (direct, pipelined,
//     host; every strategy when the group's Config.Deterministic is set),
//     so two runs of the same program give bitwise-identical gradients,
//     whatever the cost model picks on the day. Options.AnyOrder lifts the
//     restriction. A strategy set explicitly in Config.Strategy runs as
//     set: the same strategy every run gives the same bits every run.
//     Across processes (a group over a Transport) the promise is for a
//     fixed process layout: Auto runs the transport's native all-reduce
//     (MPI's, whose reduction order depends on the number of processes)
//     or the hierarchical ring, so 1x4, 2x2 and 4x1 processes of the same
//     4 ranks may differ in the last bits. With Config.Deterministic the
//     native path moves raw blocks between processes and reduces them in
//     global rank order, the one-process deterministic result for every
//     layout (collective's Strategy Native), at L times the bytes of a
//     reduce-scatter of partial sums for L ranks per process.
//   - Fusion: SyncAll packs many small tensors into buckets (one collective
//     per bucket instead of one per tensor).
//   - A shape check: at the first step, and whenever a step's shapes (the
//     number of tensors and their lengths, in order) differ from the last
//     step's, the ranks agree on them (one small all-reduce, not one per
//     step); ranks whose shapes differ all fail with the same ShapeError
//     instead of reducing mismatched tensors into each other. The same
//     all-reduce (at the first step, or at NewReducer) agrees on the
//     Options: ranks created with different ones (one with a Wire format,
//     another Adaptive, different FusionBytes or gradient types) all fail
//     with the same OptionsError naming the field and the values.
//   - Errors in the user's terms: a step whose collective fails returns a
//     StepError naming the ddp call (Sync.Sync, Sync.SyncAll,
//     Sync.SyncAsync, Reducer.Wait), the rank, the step, the bucket of a
//     Reducer and the strategy that ran, with the collective's own
//     *collective.Error in the chain for errors.Is and errors.As.
//   - An Arena: one pinned allocation with a view per tensor, for
//     frameworks to keep gradients in, so a whole-model Sync is one
//     zero-copy collective.
//   - 16-bit gradients: a Sync (and an Arena) of collective.Float16 or
//     collective.BFloat16 averages in float32 and rounds once to 16 bits,
//     bitwise the same on every rank (the type set Grad).
//   - Compression: top-k with error feedback (Options.TopK), or a 16-bit
//     wire format for float32 gradients (Options.Wire).
//   - Asynchronous steps (SyncAsync) that overlap the next step's compute.
//   - Overlap with the backward pass: a Reducer (NewReducer) reduces a
//     model's gradients in buckets fixed at its creation, each bucket's
//     all-reduce starting as soon as it and every bucket before it were
//     marked ready (MarkReady), while backward computes the rest; NoSync
//     makes accumulation steps that reduce nothing (torch's no_sync); a
//     gradient never marked ready is named by Wait (an UnreadyError on
//     that rank, a prompt mismatch on the others), not waited for.
//   - Checkpoints: Sync.State and Sync.Restore save and restore a rank's
//     top-k error-feedback residual and counters, so that a job resumed
//     from a checkpoint continues bitwise as the uninterrupted job would.
//   - BroadcastParameters: the initial parameters copied from one rank to
//     every rank (small tensors fused into buckets), so that every rank
//     starts from bitwise the same model.
//   - An optional adaptive selector (Options.Adaptive, off by default) that
//     probes the strategies the cost model rates close to the best and
//     switches, the same way on every rank, when one is measurably faster
//     than the current strategy (Auto's own steps included), and switches
//     back if the new one then measures slower than the one it left.
//   - Quiet: nothing is logged unless Options.Logger or GOCOLL_DEBUG is set.
//
// Every rank creates its own Sync over its own Comm and makes the same
// sequence of calls, from one goroutine per rank. A step waits for every
// rank: a rank that pauses (a checkpoint, an evaluation) is waited for up
// to the group's Config.CommunicationTimeout (10 minutes by default; a ctx
// with a deadline bounds a step more tightly), while a rank that is gone
// (its function in Group.Run returned or panicked, its Comm was closed)
// fails the others' steps at once (collective.ErrRankGone).
package ddp
