// Package kgen compiles gocoll's GLSL compute kernels to SPIR-V (glslc) and
// MSL (spirv-cross), reflects their interfaces, and writes the generated Go
// table. go generate ./kernels and the drift test both call Generate.
package kgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Variant is one compiled kernel: a GLSL source compiled with some defines.
type Variant struct {
	Name    string   // output name, e.g. "reduce_f32"
	Source  string   // GLSL file, e.g. "reduce.comp"
	Defines []string // -D flags
	MSL     bool     // also cross-compile to MSL (not f64: MSL has no double)
	// MSLVersion is the MSL version spirv-cross targets: 2.1 unless the
	// kernel needs more (64-bit integers in buffers need MSL 2.3).
	MSLVersion string
}

// Variants lists every kernel gocoll ships.
var Variants = []Variant{
	{Name: "reduce_f32", Source: "reduce.comp", MSL: true},
	{Name: "reduce_f64", Source: "reduce.comp", Defines: []string{"GOCOLL_F64"}},
	{Name: "scale_f32", Source: "scale.comp", MSL: true},
	{Name: "scale_f64", Source: "scale.comp", Defines: []string{"GOCOLL_F64"}},
	// 16-byte variants (vec4, dvec2): n and offsets in vectors.
	{Name: "reduce4_f32", Source: "reduce.comp", Defines: []string{"GOCOLL_VEC"}, MSL: true},
	{Name: "reduce4_f64", Source: "reduce.comp", Defines: []string{"GOCOLL_F64", "GOCOLL_VEC"}},
	{Name: "scale4_f32", Source: "scale.comp", Defines: []string{"GOCOLL_VEC"}, MSL: true},
	{Name: "scale4_f64", Source: "scale.comp", Defines: []string{"GOCOLL_F64", "GOCOLL_VEC"}},
	// Several destinations (bindings 0..7), sources at bindings 8..15.
	{Name: "reducem_f32", Source: "reduce.comp", Defines: []string{"GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_f64", Source: "reduce.comp", Defines: []string{"GOCOLL_F64", "GOCOLL_MULTI"}},
	{Name: "reducem4_f32", Source: "reduce.comp", Defines: []string{"GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem4_f64", Source: "reduce.comp", Defines: []string{"GOCOLL_F64", "GOCOLL_VEC", "GOCOLL_MULTI"}},
	// The float32 kernels of devices that may flush subnormals (no
	// shaderDenormPreserveFloat32, and the self-test at open found them
	// flushing): elements as bits, float32.glsl's exact arithmetic.
	{Name: "reduce_f32_ftz", Source: "reduce.comp", Defines: []string{"GOCOLL_FTZ"}, MSL: true},
	{Name: "reduce4_f32_ftz", Source: "reduce.comp", Defines: []string{"GOCOLL_FTZ", "GOCOLL_VEC"}, MSL: true},
	{Name: "reducem_f32_ftz", Source: "reduce.comp", Defines: []string{"GOCOLL_FTZ", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem4_f32_ftz", Source: "reduce.comp", Defines: []string{"GOCOLL_FTZ", "GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true},
	{Name: "scale_f32_ftz", Source: "scale.comp", Defines: []string{"GOCOLL_FTZ"}, MSL: true},
	{Name: "scale4_f32_ftz", Source: "scale.comp", Defines: []string{"GOCOLL_FTZ", "GOCOLL_VEC"}, MSL: true},
	// 32-bit integers (int, uint; ivec4, uvec4): wrapping sum and prod,
	// never scaled.
	{Name: "reduce_i32", Source: "reduce.comp", Defines: []string{"GOCOLL_I32"}, MSL: true},
	{Name: "reduce_u32", Source: "reduce.comp", Defines: []string{"GOCOLL_U32"}, MSL: true},
	{Name: "reduce4_i32", Source: "reduce.comp", Defines: []string{"GOCOLL_I32", "GOCOLL_VEC"}, MSL: true},
	{Name: "reduce4_u32", Source: "reduce.comp", Defines: []string{"GOCOLL_U32", "GOCOLL_VEC"}, MSL: true},
	{Name: "reducem_i32", Source: "reduce.comp", Defines: []string{"GOCOLL_I32", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_u32", Source: "reduce.comp", Defines: []string{"GOCOLL_U32", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem4_i32", Source: "reduce.comp", Defines: []string{"GOCOLL_I32", "GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem4_u32", Source: "reduce.comp", Defines: []string{"GOCOLL_U32", "GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true},
	// 64-bit integers (int64_t, uint64_t; i64vec2, u64vec2): as the 32-bit
	// ones, needing shaderInt64 (and MSL 2.3).
	{Name: "reduce_i64", Source: "reduce.comp", Defines: []string{"GOCOLL_I64"}, MSL: true, MSLVersion: msl23},
	{Name: "reduce_u64", Source: "reduce.comp", Defines: []string{"GOCOLL_U64"}, MSL: true, MSLVersion: msl23},
	{Name: "reduce4_i64", Source: "reduce.comp", Defines: []string{"GOCOLL_I64", "GOCOLL_VEC"}, MSL: true, MSLVersion: msl23},
	{Name: "reduce4_u64", Source: "reduce.comp", Defines: []string{"GOCOLL_U64", "GOCOLL_VEC"}, MSL: true, MSLVersion: msl23},
	{Name: "reducem_i64", Source: "reduce.comp", Defines: []string{"GOCOLL_I64", "GOCOLL_MULTI"}, MSL: true, MSLVersion: msl23},
	{Name: "reducem_u64", Source: "reduce.comp", Defines: []string{"GOCOLL_U64", "GOCOLL_MULTI"}, MSL: true, MSLVersion: msl23},
	{Name: "reducem4_i64", Source: "reduce.comp", Defines: []string{"GOCOLL_I64", "GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true, MSLVersion: msl23},
	{Name: "reducem4_u64", Source: "reduce.comp", Defines: []string{"GOCOLL_U64", "GOCOLL_VEC", "GOCOLL_MULTI"}, MSL: true, MSLVersion: msl23},
	// 8-bit integers (int8_t, uint8_t storage), needing
	// storageBuffer8BitAccess; no 16-byte variants.
	{Name: "reduce_i8", Source: "reduce.comp", Defines: []string{"GOCOLL_I8"}, MSL: true},
	{Name: "reduce_u8", Source: "reduce.comp", Defines: []string{"GOCOLL_U8"}, MSL: true},
	{Name: "reducem_i8", Source: "reduce.comp", Defines: []string{"GOCOLL_I8", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_u8", Source: "reduce.comp", Defines: []string{"GOCOLL_U8", "GOCOLL_MULTI"}, MSL: true},
	// 16-bit integers (int16_t, uint16_t storage), as the 8-bit ones,
	// needing storageBuffer16BitAccess.
	{Name: "reduce_i16", Source: "reduce.comp", Defines: []string{"GOCOLL_I16"}, MSL: true},
	{Name: "reduce_u16", Source: "reduce.comp", Defines: []string{"GOCOLL_U16"}, MSL: true},
	{Name: "reducem_i16", Source: "reduce.comp", Defines: []string{"GOCOLL_I16", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_u16", Source: "reduce.comp", Defines: []string{"GOCOLL_U16", "GOCOLL_MULTI"}, MSL: true},
	// binary16 and bfloat16 (uint16_t storage), reduced in float32 and
	// rounded once, needing storageBuffer16BitAccess; _in32 reads src0, _out32
	// writes dst as float32 partial results (more than 8 sources).
	{Name: "reduce_f16", Source: "reduce.comp", Defines: []string{"GOCOLL_F16"}, MSL: true},
	{Name: "reduce_f16_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_F16", "GOCOLL_IN32"}, MSL: true},
	{Name: "reduce_f16_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_F16", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reduce_f16_in32_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_F16", "GOCOLL_IN32", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reducem_f16", Source: "reduce.comp", Defines: []string{"GOCOLL_F16", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_f16_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_F16", "GOCOLL_IN32", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reduce_bf16", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16"}, MSL: true},
	{Name: "reduce_bf16_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16", "GOCOLL_IN32"}, MSL: true},
	{Name: "reduce_bf16_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reduce_bf16_in32_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16", "GOCOLL_IN32", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reducem_bf16", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_bf16_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_BF16", "GOCOLL_IN32", "GOCOLL_MULTI"}, MSL: true},
	// OCP fp8 E4M3 (FN) and E5M2 (uint8_t storage), reduced in float32 and
	// rounded once as the 16-bit floats are, needing storageBuffer8BitAccess.
	{Name: "reduce_e4m3", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3"}, MSL: true},
	{Name: "reduce_e4m3_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3", "GOCOLL_IN32"}, MSL: true},
	{Name: "reduce_e4m3_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reduce_e4m3_in32_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3", "GOCOLL_IN32", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reducem_e4m3", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_e4m3_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_E4M3", "GOCOLL_IN32", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reduce_e5m2", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2"}, MSL: true},
	{Name: "reduce_e5m2_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2", "GOCOLL_IN32"}, MSL: true},
	{Name: "reduce_e5m2_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reduce_e5m2_in32_out32", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2", "GOCOLL_IN32", "GOCOLL_OUT32"}, MSL: true},
	{Name: "reducem_e5m2", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2", "GOCOLL_MULTI"}, MSL: true},
	{Name: "reducem_e5m2_in32", Source: "reduce.comp", Defines: []string{"GOCOLL_E5M2", "GOCOLL_IN32", "GOCOLL_MULTI"}, MSL: true},
	{Name: "pack", Source: "pack.comp", MSL: true},
	{Name: "unpack", Source: "unpack.comp", MSL: true},
	{Name: "topk_f32", Source: "topk.comp", MSL: true},
	{Name: "topk_f64", Source: "topk.comp", Defines: []string{"GOCOLL_F64"}},
}

// msl23 is the MSL version of the kernels with 64-bit integers.
const msl23 = "20300"

// Tools are the programs Generate runs.
var Tools = []string{"glslc", "spirv-cross"}

// ErrToolMissing means glslc or spirv-cross is not installed.
var ErrToolMissing = errors.New("kernel tool missing")

// CheckTools reports whether the tools are on PATH.
func CheckTools() error {
	for _, t := range Tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found (Debian: apt-get install glslc spirv-cross): %w", t, ErrToolMissing)
		}
	}
	return nil
}

func run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// ToolVersions returns the first line of each tool's version output.
func ToolVersions() (string, error) {
	g, err := run("glslc", "--version")
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(g)), "\n")
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Target:") {
			continue
		}
		parts = append(parts, l)
	}
	// spirv-cross prints no version of its own beyond the Debian revision,
	// so read the package version where dpkg exists.
	sc := "spirv-cross"
	if out, err := run("dpkg-query", "-W", "-f=${Version}", "spirv-cross"); err == nil {
		sc += " " + strings.TrimSpace(string(out))
	}
	return strings.Join(parts, ", ") + "; " + sc, nil
}

type reflection struct {
	EntryPoints []struct {
		Name          string `json:"name"`
		WorkgroupSize []int  `json:"workgroup_size"`
		IsSpecID      []bool `json:"workgroup_size_is_spec_constant_id"`
	} `json:"entryPoints"`
	SSBOs []struct {
		Name     string `json:"name"`
		Set      int    `json:"set"`
		Binding  int    `json:"binding"`
		ReadOnly bool   `json:"readonly"`
	} `json:"ssbos"`
	PushConstants []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"push_constants"`
	Types map[string]struct {
		Name    string `json:"name"`
		Members []struct {
			Name   string `json:"name"`
			Type   string `json:"type"`
			Offset int    `json:"offset"`
			Array  []int  `json:"array"`
			Stride int    `json:"array_stride"`
		} `json:"members"`
	} `json:"types"`
	SpecConstants []struct {
		Name    string `json:"name"`
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Default any    `json:"default_value"`
	} `json:"specialization_constants"`
}

func typeSize(t string) int {
	switch t {
	case "double", "uint64_t", "int64_t":
		return 8
	}
	return 4
}

// Generate compiles every variant from srcDir into outDir (spv/, msl/ and
// zkernels.go). outDir may equal srcDir.
func Generate(srcDir, outDir string) error {
	if err := CheckTools(); err != nil {
		return err
	}
	versions, err := ToolVersions()
	if err != nil {
		return err
	}
	for _, d := range []string{"spv", "msl"} {
		if err := os.MkdirAll(filepath.Join(outDir, d), 0o755); err != nil {
			return err
		}
	}
	// The variants compile independently: one glslc and spirv-cross at a
	// time per core; the table keeps Variants' order.
	rows := make([]string, len(Variants))
	errs := make([]error, len(Variants))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), len(Variants)) {
		wg.Go(func() {
			for i := range next {
				rows[i], errs[i] = compile(Variants[i], srcDir, outDir)
			}
		})
	}
	for i := range Variants {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first variant's failure, as one at a time
		}
	}
	var table bytes.Buffer
	for _, r := range rows {
		table.WriteString(r)
	}
	var src bytes.Buffer
	fmt.Fprintf(&src, "// Code generated by go generate ./kernels (kernels/internal/kgen) with %s. DO NOT EDIT.\n\n", versions)
	fmt.Fprintf(&src, "package kernels\n\n")
	fmt.Fprintf(&src, "// ToolVersions names the compilers that produced the checked-in kernels.\n")
	fmt.Fprintf(&src, "const ToolVersions = %q\n\n", versions)
	fmt.Fprintf(&src, "// table holds each kernel's reflected interface.\nvar table = map[string]Info{\n%s}\n", table.String())
	out, err := format.Source(src.Bytes())
	if err != nil {
		return fmt.Errorf("format zkernels.go: %w", err)
	}
	return os.WriteFile(filepath.Join(outDir, "zkernels.go"), out, 0o644)
}

// compile compiles v from srcDir into outDir's spv/ (and msl/), reflects it
// and returns its line of the generated table.
func compile(v Variant, srcDir, outDir string) (string, error) {
	spv := filepath.Join(outDir, "spv", v.Name+".spv")
	args := []string{"-fshader-stage=compute", "--target-env=vulkan1.1"}
	for _, d := range v.Defines {
		args = append(args, "-D"+d)
	}
	// Compile from inside srcDir with a relative path, so no absolute
	// path of this machine ends up in the output.
	args = append(args, v.Source, "-o", spv)
	abs, err := filepath.Abs(spv)
	if err != nil {
		return "", err
	}
	args[len(args)-1] = abs
	cmd := exec.Command("glslc", args...)
	cmd.Dir = srcDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("glslc %s: %v: %s", v.Name, err, out)
	}
	js, err := run("spirv-cross", abs, "--reflect")
	if err != nil {
		return "", err
	}
	var r reflection
	if err := json.Unmarshal(js, &r); err != nil {
		return "", fmt.Errorf("reflect %s: %w", v.Name, err)
	}
	if v.MSL {
		msl := filepath.Join(outDir, "msl", v.Name+".metal")
		ver := v.MSLVersion
		if ver == "" {
			ver = "20100"
		}
		if _, err := run("spirv-cross", abs, "--msl", "--msl-version", ver, "--msl-decoration-binding", "--output", msl); err != nil {
			return "", err
		}
	}
	if len(r.EntryPoints) != 1 {
		return "", fmt.Errorf("%s: %d entry points", v.Name, len(r.EntryPoints))
	}
	ep := r.EntryPoints[0]
	wgSpec := -1
	if len(ep.IsSpecID) > 0 && ep.IsSpecID[0] {
		wgSpec = ep.WorkgroupSize[0]
	}
	nb := 0
	var ro []string
	sort.Slice(r.SSBOs, func(i, j int) bool { return r.SSBOs[i].Binding < r.SSBOs[j].Binding })
	for i, s := range r.SSBOs {
		if s.Set != 0 || s.Binding != i {
			return "", fmt.Errorf("%s: bindings must be set 0, dense from 0 (got set %d binding %d)", v.Name, s.Set, s.Binding)
		}
		nb++
		ro = append(ro, fmt.Sprint(s.ReadOnly))
	}
	push := 0
	for _, pc := range r.PushConstants {
		t, ok := r.Types[pc.Type]
		if !ok {
			return "", fmt.Errorf("%s: push constant type %s not reflected", v.Name, pc.Type)
		}
		for _, m := range t.Members {
			sz := typeSize(m.Type)
			if len(m.Array) > 0 {
				sz = m.Array[0] * m.Stride
			}
			if end := m.Offset + sz; end > push {
				push = end
			}
		}
	}
	var spec []string
	sort.Slice(r.SpecConstants, func(i, j int) bool { return r.SpecConstants[i].ID < r.SpecConstants[j].ID })
	for _, s := range r.SpecConstants {
		spec = append(spec, fmt.Sprintf("{ID: %d, Name: %q}", s.ID, s.Name))
	}
	return fmt.Sprintf("\t%q: {Name: %q, Source: %q, Bindings: %d, ReadOnly: []bool{%s}, PushConstantBytes: %d, WorkGroupSizeSpecID: %d, Spec: []SpecConstant{%s}, HasMSL: %v},\n",
		v.Name, v.Name, v.Source, nb, strings.Join(ro, ", "), push, wgSpec, strings.Join(spec, ", "), v.MSL), nil
}
