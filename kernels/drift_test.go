package kernels

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gocoll/gocoll/kernels/internal/kgen"
)

var write = flag.Bool("write", false, "regenerate the checked-in kernels instead of comparing")

// TestGeneratedMatchSources regenerates every kernel into a temporary folder
// and compares it byte for byte with what is checked in.
func TestGeneratedMatchSources(t *testing.T) {
	if err := kgen.CheckTools(); err != nil {
		if errors.Is(err, kgen.ErrToolMissing) && runtime.GOOS != "linux" {
			t.Skipf("%v: the checked-in kernels are pinned to Debian's glslc and spirv-cross; run the drift check on Linux", err)
		}
		t.Fatal(err)
	}
	if *write {
		if err := kgen.Generate(".", "."); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := t.TempDir()
	if err := kgen.Generate(".", tmp); err != nil {
		t.Fatal(err)
	}
	var compared int
	err := filepath.Walk(tmp, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tmp, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s is generated but not checked in (run go generate ./kernels)", rel)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its source (run go generate ./kernels)", rel)
		}
		compared++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if compared < 7 {
		t.Fatalf("compared only %d generated files", compared)
	}
}

func TestTable(t *testing.T) {
	for _, n := range []string{ReduceF32, ReduceF64, ScaleF32, ScaleF64, Reduce4F32, Reduce4F64, Scale4F32, Scale4F64, ReduceMF32, ReduceMF64, ReduceM4F32, ReduceM4F64,
		ReduceI32, ReduceU32, Reduce4I32, Reduce4U32, ReduceMI32, ReduceMU32, ReduceM4I32, ReduceM4U32,
		ReduceI64, ReduceU64, Reduce4I64, Reduce4U64, ReduceMI64, ReduceMU64, ReduceM4I64, ReduceM4U64, ReduceI8, ReduceU8, ReduceMI8, ReduceMU8,
		ReduceF16, ReduceF16In32, ReduceF16Out32, ReduceF16In32Out32, ReduceMF16, ReduceMF16In32,
		ReduceBF16, ReduceBF16In32, ReduceBF16Out32, ReduceBF16In32Out32, ReduceMBF16, ReduceMBF16In32,
		ReduceF32FTZ, Reduce4F32FTZ, ReduceMF32FTZ, ReduceM4F32FTZ, ScaleF32FTZ, Scale4F32FTZ} {
		info, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		spv, err := SPIRV(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(spv) < 20 || spv[0] != 0x03 || spv[1] != 0x02 || spv[2] != 0x23 || spv[3] != 0x07 {
			t.Errorf("%s: not SPIR-V (magic %x)", n, spv[:4])
		}
		if info.WorkGroupSizeSpecID != SpecWorkGroupSize {
			t.Errorf("%s: work-group size spec id %d", n, info.WorkGroupSizeSpecID)
		}
		if info.HasMSL {
			if _, err := MSL(n); err != nil {
				t.Error(err)
			}
		}
	}
	if r, _ := Lookup(ReduceF32); r.Bindings != 1+MaxSources {
		t.Errorf("reduce has %d bindings, want %d", r.Bindings, 1+MaxSources)
	}
	// The integer variants have the f32 kernels' interface, so the backend
	// fills their bindings, spec constants and push constants alike.
	for _, p := range [][2]string{{ReduceF32, Reduce4F32}, {ReduceF64, Reduce4F64}, {ScaleF32, Scale4F32}, {ScaleF64, Scale4F64},
		{ReduceF32, ReduceI32}, {ReduceF32, ReduceU32}, {ReduceF32, Reduce4I32}, {ReduceF32, Reduce4U32},
		{ReduceMF32, ReduceMI32}, {ReduceMF32, ReduceMU32}, {ReduceMF32, ReduceM4I32}, {ReduceMF32, ReduceM4U32},
		{ReduceF32, ReduceI64}, {ReduceF32, ReduceU64}, {ReduceF32, Reduce4I64}, {ReduceF32, Reduce4U64}, {ReduceF32, ReduceI8}, {ReduceF32, ReduceU8},
		{ReduceMF32, ReduceMI64}, {ReduceMF32, ReduceMU64}, {ReduceMF32, ReduceM4I64}, {ReduceMF32, ReduceM4U64}, {ReduceMF32, ReduceMI8}, {ReduceMF32, ReduceMU8},
		{ReduceF32, ReduceF16}, {ReduceF32, ReduceF16In32}, {ReduceF32, ReduceF16Out32}, {ReduceF32, ReduceF16In32Out32},
		{ReduceF32, ReduceBF16}, {ReduceF32, ReduceBF16In32}, {ReduceF32, ReduceBF16Out32}, {ReduceF32, ReduceBF16In32Out32},
		{ReduceMF32, ReduceMF16}, {ReduceMF32, ReduceMF16In32}, {ReduceMF32, ReduceMBF16}, {ReduceMF32, ReduceMBF16In32},
		{ReduceF32, ReduceF32FTZ}, {Reduce4F32, Reduce4F32FTZ}, {ReduceMF32, ReduceMF32FTZ}, {ReduceM4F32, ReduceM4F32FTZ},
		{ScaleF32, ScaleF32FTZ}, {Scale4F32, Scale4F32FTZ}} {
		a, _ := Lookup(p[0])
		b, _ := Lookup(p[1])
		if a.Bindings != b.Bindings || a.PushConstantBytes != b.PushConstantBytes || len(a.Spec) != len(b.Spec) {
			t.Errorf("%s and %s differ in interface: %+v, %+v", p[0], p[1], a, b)
		}
	}
	for _, n := range []string{ReduceMF32, ReduceMF64, ReduceM4F32, ReduceM4F64, ReduceMI32, ReduceMU32, ReduceM4I32, ReduceM4U32,
		ReduceMI64, ReduceMU64, ReduceM4I64, ReduceM4U64, ReduceMI8, ReduceMU8, ReduceMF16, ReduceMF16In32, ReduceMBF16, ReduceMBF16In32,
		ReduceMF32FTZ, ReduceM4F32FTZ} {
		m, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		ro := 0
		for _, r := range m.ReadOnly {
			if r {
				ro++
			}
		}
		if m.Bindings != MaxDestinations+MaxSources || ro != MaxSources || m.ReadOnly[MaxDestinations-1] || !m.ReadOnly[MaxDestinations] {
			t.Errorf("%s: %d bindings, read-only %v: want %d destinations then %d sources", n, m.Bindings, m.ReadOnly, MaxDestinations, MaxSources)
		}
		if m.PushConstantBytes != 84 || m.Spec[len(m.Spec)-1].ID != SpecM {
			t.Errorf("%s: %d push-constant bytes, spec %v", n, m.PushConstantBytes, m.Spec)
		}
	}
	if _, err := MSL(ReduceF64); err == nil {
		t.Error("MSL for an f64 kernel")
	}
	for _, n := range []string{ReduceI32, ReduceU32, Reduce4I32, Reduce4U32, ReduceMI32, ReduceMU32, ReduceM4I32, ReduceM4U32,
		ReduceI64, ReduceU64, Reduce4I64, Reduce4U64, ReduceMI64, ReduceMU64, ReduceM4I64, ReduceM4U64, ReduceI8, ReduceU8, ReduceMI8, ReduceMU8,
		ReduceF16, ReduceF16In32, ReduceF16Out32, ReduceF16In32Out32, ReduceMF16, ReduceMF16In32,
		ReduceBF16, ReduceBF16In32, ReduceBF16Out32, ReduceBF16In32Out32, ReduceMBF16, ReduceMBF16In32,
		ReduceF32FTZ, Reduce4F32FTZ, ReduceMF32FTZ, ReduceM4F32FTZ, ScaleF32FTZ, Scale4F32FTZ} {
		if info, _ := Lookup(n); !info.HasMSL {
			t.Errorf("%s has no MSL", n)
		}
	}
}
