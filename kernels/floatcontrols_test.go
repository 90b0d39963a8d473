package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// SPIR-V opcodes of float instructions whose inputs or results a device
// may flush: arithmetic (the result's width), comparisons, IsNan and IsInf
// (the first operand's), FConvert (both), and extended instructions with a
// float result (GLSL.std.450: FAbs, FMin, Ldexp...).
const (
	spvOpTypeFloat  = 22
	spvOpTypeVector = 23
	spvOpExtInst    = 12
	spvOpFConvert   = 115
)

var (
	spvFloatArith   = []uint32{127, 129, 131, 133, 136, 140, 141, 142, 143, 144, 145, 146, 147, 148}
	spvFloatCompare = []uint32{156, 157, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191}
)

// floatWidths returns the widths of the float instructions of a kernel.
func floatWidths(t *testing.T, spirv []byte) []int {
	t.Helper()
	words, err := spvWords(spirv)
	if err != nil {
		t.Fatal(err)
	}
	width := map[uint32]uint32{}  // float and float vector type id -> width
	typeOf := map[uint32]uint32{} // result id -> type id
	for _, w := range words {
		switch w[0] & 0xFFFF {
		case spvOpTypeFloat:
			width[w[1]] = w[2]
		case spvOpTypeVector:
			if c, ok := width[w[2]]; ok {
				width[w[1]] = c
			}
		}
	}
	// Instructions with a result type: word 1 the type, word 2 the id. Types,
	// constants and the rest alike; only the float ones below are counted.
	for _, w := range words {
		if len(w) >= 3 {
			typeOf[w[2]] = w[1]
		}
	}
	seen := map[int]bool{}
	for _, w := range words {
		op := w[0] & 0xFFFF
		switch {
		case slices.Contains(spvFloatArith, op), op == spvOpExtInst:
			if c, ok := width[w[1]]; ok {
				seen[int(c)] = true
			}
		case slices.Contains(spvFloatCompare, op) && len(w) >= 4:
			if c, ok := width[typeOf[w[3]]]; ok {
				seen[int(c)] = true
			}
		case op == spvOpFConvert && len(w) >= 4:
			if c, ok := width[w[1]]; ok {
				seen[int(c)] = true
			}
			if c, ok := width[typeOf[w[3]]]; ok {
				seen[int(c)] = true
			}
		}
	}
	var out []int
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// TestDenormPreserveDeclared: every kernel with float instructions declares
// DenormPreserve for each width they compute in (denorm.glsl), and the
// float kernels of every type do compute in theirs (so the check sees
// them).
func TestDenormPreserveDeclared(t *testing.T) {
	for _, name := range Names() {
		spv, err := SPIRV(name)
		if err != nil {
			t.Fatal(err)
		}
		used := floatWidths(t, spv)
		declared, err := DenormPreserveWidths(spv)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range used {
			if !slices.Contains(declared, w) {
				t.Errorf("%s: float instructions of width %d, DenormPreserve declared for %v", name, w, declared)
			}
		}
		for _, w := range declared {
			if !slices.Contains(used, w) {
				t.Errorf("%s: DenormPreserve %d declared, no float instruction of that width", name, w)
			}
		}
	}
	for name, want := range map[string]int{ReduceF32: 32, Reduce4F32: 32, ReduceMF32: 32, ReduceM4F32: 32, ScaleF32: 32, Scale4F32: 32,
		ReduceF32FTZ: 32, Reduce4F32FTZ: 32, ReduceMF32FTZ: 32, ReduceM4F32FTZ: 32, ScaleF32FTZ: 32, Scale4F32FTZ: 32,
		ReduceF64: 64, Reduce4F64: 64, ReduceMF64: 64, ReduceM4F64: 64, ScaleF64: 64, Scale4F64: 64,
		ReduceF16: 32, ReduceBF16In32: 32, ReduceMF16: 32} {
		spv, _ := SPIRV(name)
		if got := floatWidths(t, spv); !slices.Equal(got, []int{want}) {
			t.Errorf("%s computes in floats of widths %v, want [%d]", name, got, want)
		}
	}
	for _, name := range []string{"pack", "unpack", "topk_f32", "topk_f64", ReduceI32, ReduceU64, ReduceMI8} {
		spv, _ := SPIRV(name)
		if got := floatWidths(t, spv); len(got) != 0 {
			t.Errorf("%s has float instructions of widths %v", name, got)
		}
	}
}

// TestAdaptFloatControls: for every kernel and every combination of the
// three widths and the independence, AdaptFloatControls keeps exactly the DenormPreserve
// declarations of the widths the device keeps, the capability and the
// extension only while one is left, and the kernel as it is when nothing
// goes; with spirv-val on PATH (Debian: spirv-tools), the kernel without
// any declaration validates for Vulkan 1.1.
func TestAdaptFloatControls(t *testing.T) {
	val, _ := exec.LookPath("spirv-val")
	dir := t.TempDir()
	for _, name := range Names() {
		spv, _ := SPIRV(name)
		declared, _ := DenormPreserveWidths(spv)
		for m := range 24 {
			fc := FloatControls{DenormPreserve16: m&1 != 0, DenormPreserve32: m&2 != 0, DenormPreserve64: m&4 != 0,
				Independence: Independence(m / 8)}
			out, err := AdaptFloatControls(spv, fc)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := DenormPreserveWidths(out)
			if err != nil {
				t.Fatalf("%s adapted: %v", name, err)
			}
			var want []int
			for _, w := range declared {
				if fc.Keeps(w) {
					want = append(want, w)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %+v: DenormPreserve %v, want %v", name, fc, got, want)
			}
			if len(want) == len(declared) && &out[0] != &spv[0] {
				t.Errorf("%s %+v: nothing to remove, yet a new slice", name, fc)
			}
			words, _ := spvWords(out)
			hasCap, hasExt := false, false
			for _, w := range words {
				switch w[0] & 0xFFFF {
				case spvOpCapability:
					hasCap = hasCap || w[1] == spvCapDenormPreserve
				case spvOpExtension:
					hasExt = hasExt || spvString(w[1:]) == spvExtFloatControls
				}
			}
			if hasCap != (len(want) > 0) || hasExt != (len(want) > 0) {
				t.Errorf("%s %+v: capability DenormPreserve %v, extension %v, with modes %v", name, fc, hasCap, hasExt, want)
			}
			// OpExecutionMode is 4 words; OpCapability 2; OpExtension 1 and
			// the nul-terminated name.
			gone := 16 * (len(declared) - len(want))
			if len(declared) > 0 && len(want) == 0 {
				gone += 8 + 4*(1+(len(spvExtFloatControls)+4)/4)
			}
			if len(out) != len(spv)-gone {
				t.Errorf("%s %+v: %d bytes from %d: more or less than the declarations went", name, fc, len(out), len(spv))
			}
			if m == 0 && val != "" && len(declared) > 0 {
				f := filepath.Join(dir, name+".spv")
				if err := os.WriteFile(f, out, 0o644); err != nil {
					t.Fatal(err)
				}
				if msg, err := exec.Command(val, "--target-env", "vulkan1.1", f).CombinedOutput(); err != nil {
					t.Errorf("%s without float controls: spirv-val: %v: %s", name, err, msg)
				}
			}
		}
		if out, _ := AdaptFloatControls(spv, FloatControls{DenormPreserve16: true, DenormPreserve32: true, DenormPreserve64: true}); !bytes.Equal(out, spv) {
			t.Errorf("%s: changed for a device that keeps every width", name)
		}
	}
	if val == "" {
		t.Log("spirv-val not on PATH: the adapted kernels were not validated")
	}
	for _, c := range []struct {
		fc   FloatControls
		want [3]bool // keeps 16, 32, 64
	}{
		{FloatControls{DenormPreserve16: true, DenormPreserve32: true, DenormPreserve64: true}, [3]bool{true, true, true}},
		{FloatControls{DenormPreserve16: true, DenormPreserve32: true, DenormPreserve64: true, Independence: Independence32BitOnly}, [3]bool{false, true, false}},
		{FloatControls{DenormPreserve16: true, DenormPreserve32: true, DenormPreserve64: true, Independence: IndependenceNone}, [3]bool{}},
		{FloatControls{DenormPreserve64: true}, [3]bool{false, false, true}},
	} {
		if got := [3]bool{c.fc.Keeps(16), c.fc.Keeps(32), c.fc.Keeps(64)}; got != c.want {
			t.Errorf("%+v keeps 16/32/64 %v, want %v", c.fc, got, c.want)
		}
	}
	if _, err := AdaptFloatControls([]byte{1, 2, 3, 4}, FloatControls{}); err == nil {
		t.Error("AdaptFloatControls took 4 bytes that are not SPIR-V")
	}
}
