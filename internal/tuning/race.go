//go:build race

package tuning

// measureShift shrinks Measure's parallel memcpy (8 MiB, in a 16 MiB
// buffer) by 1<<measureShift under the race detector: its timings are then
// of instrumented code, which models no machine, and at full size that step
// alone cost a group's first Auto call about 0.2 s on 2 cores (the other
// steps keep their sizes: Auto's choices under the race detector stay those
// the tests expect of its other constants).
const measureShift = 4
