package cshim

// Structural checks of metal.m that run everywhere, Linux CI included, since
// no machine that runs this repository's CI can compile or run Objective-C
// for Metal: the table is complete, every entry runs in an autorelease pool,
// only f64 kernels are unsupported, ARC is used throughout.

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// stripC removes comments and, unless keepStrings, the contents of string
// and character literals (keeping the quotes), so that braces and words
// inside them do not count.
func stripC(src string, keepStrings bool) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		switch {
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return b.String()
			}
			i += end + 4
			b.WriteByte(' ')
		case !keepStrings && (src[i] == '"' || src[i] == '\''):
			q := src[i]
			b.WriteByte(q)
			i++
			for i < len(src) && src[i] != q {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			b.WriteByte(q)
			i++
		default:
			b.WriteByte(src[i])
			i++
		}
	}
	return b.String()
}

// block returns the text between the '{' at or after from and its matching
// '}', and the offset just after that '}'.
func block(t *testing.T, src string, from int) (string, int) {
	t.Helper()
	open := strings.IndexByte(src[from:], '{')
	if open < 0 {
		t.Fatalf("no block after offset %d", from)
	}
	open += from
	depth := 0
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[open+1 : i], i + 1
			}
		}
	}
	t.Fatalf("unbalanced braces after offset %d", open)
	return "", 0
}

func readSource(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// abiFields returns the fields of shim.h's struct gc_backend, in order.
func abiFields(t *testing.T) []string {
	t.Helper()
	h := stripC(readSource(t, "shim.h"), false)
	at := strings.Index(h, "typedef struct gc_backend")
	if at < 0 {
		t.Fatal("shim.h: no typedef struct gc_backend")
	}
	body, _ := block(t, h, at)
	fnptr := regexp.MustCompile(`\(\s*\*\s*(\w+)\s*\)`)
	last := regexp.MustCompile(`(\w+)\s*$`)
	var fields []string
	for _, decl := range strings.Split(body, ";") {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		if m := fnptr.FindStringSubmatch(decl); m != nil {
			fields = append(fields, m[1])
		} else if m := last.FindStringSubmatch(decl); m != nil {
			fields = append(fields, m[1])
		} else {
			t.Fatalf("shim.h: cannot read field %q of gc_backend", decl)
		}
	}
	if len(fields) < 20 || fields[0] != "abi_version" || fields[1] != "name" {
		t.Fatalf("shim.h: gc_backend fields %v do not look right", fields)
	}
	return fields
}

// tableInit returns the designated initializers of the gc_backend table that
// src defines as `static const gc_backend <table> = { ... };`.
func tableInit(t *testing.T, file, src, table string) map[string]string {
	t.Helper()
	decl := regexp.MustCompile(`static\s+const\s+gc_backend\s+` + table + `\s*=`).FindStringIndex(src)
	if decl == nil {
		t.Fatalf("%s: no static const gc_backend %s = {...}", file, table)
	}
	body, _ := block(t, src, decl[1])
	out := map[string]string{}
	entry := regexp.MustCompile(`^\.(\w+)\s*=\s*(.+)$`)
	for _, e := range strings.Split(body, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		m := entry.FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("%s: table entry %q is not a designated initializer", file, e)
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s: .%s set twice", file, m[1])
		}
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

func checkTable(t *testing.T, file, src, table, name string) map[string]string {
	t.Helper()
	fields := abiFields(t)
	init := tableInit(t, file, stripC(src, true), table)
	for _, f := range fields {
		if _, ok := init[f]; !ok {
			t.Errorf("%s: %s leaves gc_backend.%s (shim.h) unset", file, table, f)
		}
	}
	for f := range init {
		if !slices.Contains(fields, f) {
			t.Errorf("%s: %s sets .%s, which shim.h's gc_backend does not have", file, table, f)
		}
	}
	if init["abi_version"] != "GC_ABI_VERSION" {
		t.Errorf("%s: .abi_version = %s, want GC_ABI_VERSION", file, init["abi_version"])
	}
	if init["name"] != `"`+name+`"` {
		t.Errorf("%s: .name = %s, want %q", file, init["name"], name)
	}
	return init
}

// funcBody returns the body of the static function fn defined in src.
func funcBody(t *testing.T, file, src, fn string) string {
	t.Helper()
	def := regexp.MustCompile(`(?m)^static\s+[\w\s\*]*\b` + regexp.QuoteMeta(fn) + `\s*\([^;{]*\)\s*\{`).FindStringIndex(src)
	if def == nil {
		t.Fatalf("%s: no definition of static function %s", file, fn)
	}
	body, _ := block(t, src, def[1]-1)
	return body
}

// TestMetalTable: metal.m fills every entry of shim.h's gc_backend, and
// nothing else, with functions it defines (what cs_missing checks at run
// time on a Mac, checked here from the source).
func TestMetalTable(t *testing.T) {
	raw := readSource(t, "metal.m")
	src := stripC(raw, false)
	init := checkTable(t, "metal.m", raw, "metal_backend", "metal")
	for f, fn := range init {
		if f == "abi_version" || f == "name" {
			continue
		}
		if !regexp.MustCompile(`^mtl_\w+$`).MatchString(fn) {
			t.Errorf("metal.m: .%s = %s, want a mtl_* function", f, fn)
			continue
		}
		funcBody(t, "metal.m", src, fn)
	}
	if !regexp.MustCompile(`(?m)^const gc_backend \*gc_metal\(void\)\s*\{\s*return &metal_backend;\s*\}`).MatchString(src) {
		t.Error("metal.m: gc_metal() does not return &metal_backend")
	}
}

// TestOtherTables: the same completeness check for vulkan.c and for the Go
// binding's run-time check (cs_missing in cshim.go), so a new ABI entry
// cannot be forgotten by one implementation while the others have it.
func TestOtherTables(t *testing.T) {
	checkTable(t, "vulkan.c", readSource(t, "vulkan.c"), "vulkan_backend", "vulkan")
	goSrc := readSource(t, "cshim.go")
	for _, f := range abiFields(t) {
		if f == "abi_version" {
			continue
		}
		if !strings.Contains(goSrc, "b->"+f+" == NULL") {
			t.Errorf("cshim.go: cs_missing does not check gc_backend.%s", f)
		}
	}
}

// TestMetalAutoreleasePools: the body of every table entry is one
// @autoreleasepool block, so what Metal autoreleases during a call is freed
// when the call returns (cgo calls run on threads without an outer pool).
func TestMetalAutoreleasePools(t *testing.T) {
	src := stripC(readSource(t, "metal.m"), false)
	for f, fn := range tableInit(t, "metal.m", src, "metal_backend") {
		if f == "abi_version" || f == "name" {
			continue
		}
		body := strings.TrimSpace(funcBody(t, "metal.m", src, fn))
		if !strings.HasPrefix(body, "@autoreleasepool") {
			t.Errorf("metal.m: %s (.%s) does not start with @autoreleasepool", fn, f)
			continue
		}
		_, end := block(t, body, len("@autoreleasepool"))
		if rest := strings.TrimSpace(body[end:]); rest != "" {
			t.Errorf("metal.m: %s has code after its @autoreleasepool block: %.40q", fn, rest)
		}
	}
}

// TestMetalUnsupportedOnlyF64: GC_UNSUPPORTED appears only in
// unsupported_f64, which only kernel_create calls: everything else Metal
// can do, so any other failure is a bug or a real error, not a gap.
func TestMetalUnsupportedOnlyF64(t *testing.T) {
	src := stripC(readSource(t, "metal.m"), false)
	helper := funcBody(t, "metal.m", src, "unsupported_f64")
	if n := strings.Count(helper, "GC_UNSUPPORTED"); n != 1 {
		t.Fatalf("metal.m: unsupported_f64 mentions GC_UNSUPPORTED %d times, want 1", n)
	}
	if n := strings.Count(src, "GC_UNSUPPORTED"); n != 1 {
		t.Errorf("metal.m: GC_UNSUPPORTED appears %d times; only unsupported_f64 may return it", n)
	}
	calls := regexp.MustCompile(`\bunsupported_f64\(`).FindAllStringIndex(src, -1)
	kc := funcBody(t, "metal.m", src, "mtl_kernel_create")
	inKC := regexp.MustCompile(`\bunsupported_f64\(`).FindAllStringIndex(kc, -1)
	// The definition itself is one match in src.
	if len(calls)-1 != len(inKC) || len(inKC) == 0 {
		t.Errorf("metal.m: unsupported_f64 is called %d times, %d of them in mtl_kernel_create; only kernel_create may call it",
			len(calls)-1, len(inKC))
	}
	if !strings.Contains(kc, "msl_has_double") || !strings.Contains(kc, "spirv_float64") {
		t.Error("metal.m: mtl_kernel_create does not check for double (MSL) and Float64 (SPIR-V)")
	}
}

// TestMetalARC: metal.m refuses to build without ARC, and uses ARC's way of
// holding objects across calls (CFBridgingRetain into CFTypeRef fields,
// CFRelease to drop them) rather than manual retain/release messages.
func TestMetalARC(t *testing.T) {
	raw := readSource(t, "metal.m")
	if !strings.HasPrefix(raw, "//go:build darwin && !nometal\n") {
		t.Error("metal.m: the first line must be //go:build darwin && !nometal (the Go tool honours it for .m files)")
	}
	if !regexp.MustCompile(`#if !__has_feature\(objc_arc\)\s*\n#error`).MatchString(raw) {
		t.Error("metal.m: no #error when compiled without ARC")
	}
	src := stripC(raw, false)
	for _, bad := range []string{" retain]", " release]", " autorelease]", " dealloc]", "__bridge_retained", "__bridge_transfer",
		"__unsafe_unretained", "NSAutoreleasePool"} {
		if strings.Contains(src, bad) {
			t.Errorf("metal.m uses %q: with ARC, objects held across calls go through CFBridgingRetain/CFRelease", strings.TrimSpace(bad))
		}
	}
	if !strings.Contains(src, "CFBridgingRetain(") || !strings.Contains(src, "CFRelease(") {
		t.Error("metal.m holds no object across calls through CFBridgingRetain/CFRelease")
	}
	g := readSource(t, "metal_darwin.go")
	for _, want := range []string{"//go:build cgo && !nometal", "#cgo CFLAGS: -fobjc-arc", "-framework Metal", "-framework Foundation"} {
		if !strings.Contains(g, want) {
			t.Errorf("metal_darwin.go lacks %q", want)
		}
	}
}
