//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/internal/shimdev/shimdevtest"
)

// The device and stream the backend opens (the shared implementation over
// the ABI).
type (
	device = shimdev.Device
	stream = shimdev.Stream
)

// subprocessEnv makes the test binary run one check as a child process (see
// TestUnavailableLibrary): Vulkan is loaded once per process.
const subprocessEnv = "GOCOLL_VULKAN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(subprocessEnv) == "" && !validationOff() {
		// Every test runs under the validation layer; any message fails.
		os.Setenv("GOCOLL_VULKAN_VALIDATION", "1")
	}
	code := m.Run()
	if msgs := ValidationMessages(); len(msgs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the validation layer reported %d message(s) not attributed to a test:\n%s\n",
			len(msgs), strings.Join(msgs, "\n"))
		code = 1
	}
	os.Exit(code)
}

// requireVulkan skips the test when no Vulkan device can be opened, except
// in CI (CI=true), where lavapipe must be installed and the test fails.
func requireVulkan(t testing.TB) {
	t.Helper()
	b, err := backend.Lookup("vulkan")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Available()
	if err == nil && os.Getenv("CI") == "true" {
		err = requireLavapipe(b)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true needs Vulkan with lavapipe and the validation layer (mesa-vulkan-drivers, vulkan-validationlayers): %v", err)
		}
		t.Skipf("no usable Vulkan here: %v", err)
	}
	if !inst.Info().Validation && !validationOff() {
		t.Fatalf("the Vulkan instance was created without the validation layer")
	}
}

// validationOff reports an explicit GOCOLL_VULKAN_VALIDATION=0: the tests
// then run without the layer (to time them on a real GPU; the layer costs
// tens of microseconds per command).
func validationOff() bool { return os.Getenv("GOCOLL_VULKAN_VALIDATION") == "0" }

func requireLavapipe(b backend.Backend) error {
	devs, err := b.Devices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Type == "cpu" {
			return nil
		}
	}
	return fmt.Errorf("no CPU Vulkan device (lavapipe) among %d devices", len(devs))
}

// openDevice opens Vulkan device 0 for the test and closes it at the end,
// failing the test on any validation message.
func openDevice(t testing.TB, opts backend.OpenOptions) *device {
	t.Helper()
	requireVulkan(t)
	t.Cleanup(func() { checkValidation(t) })
	return shimdevtest.Open(t, Backend{}, opts)
}

// checkValidation fails the test if the validation layer said anything.
func checkValidation(t testing.TB) {
	t.Helper()
	if msgs := ValidationMessages(); len(msgs) > 0 {
		t.Errorf("the validation layer reported %d message(s):\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

type float interface{ ~float32 | ~float64 }

func dtypeOf[T float]() backend.DType {
	var z T
	if unsafe.Sizeof(z) == 8 {
		return backend.F64
	}
	return backend.F32
}

func asBytes[T float](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(v[0])))
}

func alloc(t testing.TB, d backend.Device, bytes int, mem backend.Memory) backend.Buffer {
	t.Helper()
	b, err := d.Alloc(bytes, mem)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func put[T float](t testing.TB, b backend.Buffer, off int, v []T) {
	t.Helper()
	if err := b.Write(off, asBytes(v)); err != nil {
		t.Fatal(err)
	}
}

func get[T float](t testing.TB, b backend.Buffer, off, n int) []T {
	t.Helper()
	v := make([]T, n)
	if err := b.Read(off, asBytes(v)); err != nil {
		t.Fatal(err)
	}
	return v
}

func wait(t testing.TB, s backend.Stream) {
	t.Helper()
	f, err := s.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// combine is the kernels' operator in the element type: IEEE sum and
// product, and IEEE 754-2019 maximum/minimum (NaN wins, -0 < +0).
func combine[T float](op backend.Op, a, b T) T {
	switch op {
	case backend.Sum:
		return a + b
	case backend.Prod:
		return a * b
	}
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a == b {
		na := math.Signbit(float64(a))
		if (op == backend.Max) != na {
			return a
		}
		return b
	}
	if (op == backend.Max) == (a > b) {
		return a
	}
	return b
}

// reduceRef reduces srcs left to right in T, then scales, as the kernels do.
func reduceRef[T float](op backend.Op, srcs [][]T, scale float64) []T {
	out := make([]T, len(srcs[0]))
	for i := range out {
		acc := srcs[0][i]
		for _, s := range srcs[1:] {
			acc = combine(op, acc, s[i])
		}
		if scale != 1 {
			acc *= T(scale)
		}
		out[i] = acc
	}
	return out
}

// sameBits compares bit patterns; any NaN equals any NaN (payloads may differ).
func sameBits[T float](a, b T) bool {
	if a != a && b != b {
		return true
	}
	if unsafe.Sizeof(a) == 8 {
		return math.Float64bits(float64(a)) == math.Float64bits(float64(b))
	}
	return math.Float32bits(float32(a)) == math.Float32bits(float32(b))
}

// compare fails t at the first few elements where got and want differ in bits.
func compare[T float](t testing.TB, what string, got, want []T) {
	t.Helper()
	bad := 0
	for i := range want {
		if !sameBits(got[i], want[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d wrong elements of %d", what, bad, len(want))
	}
}
