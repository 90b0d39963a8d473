package cshim

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

// entryBuffers returns the [[buffer(n)]] index of each constant and device
// argument of the MSL kernel function.
func entryBuffers(t *testing.T, msl string) (constant, device []int) {
	t.Helper()
	loc := mslEntry.FindStringSubmatchIndex(msl)
	if loc == nil {
		t.Fatal("no kernel function")
	}
	params, err := mslParams(msl, loc[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range params {
		m := mslBuffer.FindStringSubmatch(p.text)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if strings.HasPrefix(strings.TrimSpace(p.text), "constant ") {
			constant = append(constant, n)
		} else {
			device = append(device, n)
		}
	}
	return constant, device
}

// TestMetalKernelLayout: every kernel with MSL comes out of MetalKernel with
// its storage buffers at [[buffer(0..bindings-1)]] and its push constants at
// [[buffer(bindings)]], the layout metal.m's cmd_dispatch binds, and with no
// other change to the source.
func TestMetalKernelLayout(t *testing.T) {
	var n int
	for _, name := range kernels.Names() {
		info, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if !info.HasMSL {
			if _, err := kernels.MSL(name); err == nil {
				t.Errorf("%s: MSL exists but HasMSL is false", name)
			}
			continue
		}
		if strings.HasSuffix(name, "_f64") {
			t.Errorf("%s: an f64 kernel has MSL, but Metal has no double", name)
		}
		n++
		src, err := kernels.MSL(name)
		if err != nil {
			t.Fatal(err)
		}
		code, entry, err := MetalKernel(src, info.Bindings)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if entry != "main0" {
			t.Errorf("%s: entry %q, want spirv-cross's main0", name, entry)
		}
		if len(code)%4 != 0 {
			t.Errorf("%s: %d bytes, not whole words", name, len(code))
		}
		constant, device := entryBuffers(t, string(code))
		wantPush := 0
		if info.PushConstantBytes > 0 {
			wantPush = 1
		}
		if len(constant) != wantPush || (wantPush == 1 && constant[0] != info.Bindings) {
			t.Errorf("%s: constant buffers at %v, want the push constants at [%d]", name, constant, info.Bindings)
		}
		seen := map[int]bool{}
		for _, i := range device {
			if i < 0 || i >= info.Bindings || seen[i] {
				t.Errorf("%s: storage buffers at %v, want each of 0..%d once", name, device, info.Bindings-1)
				break
			}
			seen[i] = true
		}
		if len(seen) != info.Bindings {
			t.Errorf("%s: %d storage buffers, want %d", name, len(seen), info.Bindings)
		}
		// Only the push-constant index changed (and padding was added).
		got := strings.TrimRight(string(code), "\n")
		norm := regexp.MustCompile(`(constant\s+\w+&\s*\w+\s*)\[\[buffer\(\d+\)\]\]`)
		if a, b := norm.ReplaceAllString(got, "${1}[[buffer(N)]]"), norm.ReplaceAllString(strings.TrimRight(src, "\n"), "${1}[[buffer(N)]]"); a != b {
			t.Errorf("%s: MetalKernel changed more than the push-constant index", name)
		}
		// Idempotent: the checked-in MSL may one day come out of the
		// generator with this layout already.
		again, _, err := MetalKernel(string(code), info.Bindings)
		if err != nil || string(again) != string(code) {
			t.Errorf("%s: MetalKernel is not idempotent (%v)", name, err)
		}
	}
	if n < 2 {
		t.Fatalf("only %d kernels have MSL; every f32 kernel should", n)
	}
	for _, name := range []string{kernels.ReduceF32, kernels.ScaleF32} {
		if info, _ := kernels.Lookup(name); !info.HasMSL {
			t.Errorf("%s has no MSL", name)
		}
	}
}

func TestMetalKernelRejects(t *testing.T) {
	const head = "#include <metal_stdlib>\nusing namespace metal;\n"
	for _, c := range []struct {
		name, src string
		bindings  int
	}{
		{"no kernel", head, 1},
		{"two kernels", head + "kernel void a(device float* x [[buffer(0)]]) {}\nkernel void b(device float* x [[buffer(0)]]) {}\n", 1},
		{"missing binding", head + "kernel void main0(device float* x [[buffer(0)]], device float* y [[buffer(2)]]) {}\n", 2},
		{"duplicate binding", head + "kernel void main0(device float* x [[buffer(0)]], device float* y [[buffer(0)]]) {}\n", 2},
		{"too few bindings", head + "kernel void main0(device float* x [[buffer(0)]], device float* y [[buffer(1)]]) {}\n", 1},
		{"two constant blocks", head + "kernel void main0(constant P& a [[buffer(0)]], constant P& b [[buffer(0)]], device float* x [[buffer(0)]]) {}\n", 1},
		{"unterminated", head + "kernel void main0(device float* x [[buffer(0)]]", 1},
		{"no bindings", head + "kernel void main0() {}\n", 0},
		{"too many bindings", head, 31},
	} {
		if _, _, err := MetalKernel(c.src, c.bindings); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", c.name, err)
		}
	}
}
