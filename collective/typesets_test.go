package collective

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The element type sets (Float, Integer, Elem) must stay exact: Float16 and
// BFloat16, defined on uint16, are not integers, although uint16 is; the fp8
// types, one byte each, are not integers, although types defined on uint8
// are. Go
// cannot ask at run time whether a type satisfies a constraint, so
// TestTypeSets asks the type checker: it takes the constraint and element
// type declarations from types.go as they are, and checks one instantiation
// per (constraint, type) pair in a package of their own.

// typeSetDecls are the declarations of types.go the type-set checks need.
var typeSetDecls = []string{"Float", "Integer", "Elem", "Float16", "BFloat16", "Float8E4M3", "Float8E5M2"}

// typeSetCases are the types checked, by the Go expression of each, and
// the constraints each must satisfy (every other one it must not).
var typeSetCases = []struct {
	typ string
	in  []string
}{
	{"float32", []string{"Float", "Elem"}},
	{"float64", []string{"Float", "Elem"}},
	{"myFloat32", []string{"Float", "Elem"}},
	{"int8", []string{"Integer", "Elem"}},
	{"uint8", []string{"Integer", "Elem"}},
	{"byte", []string{"Integer", "Elem"}},
	{"myUint8", []string{"Integer", "Elem"}},
	{"int16", []string{"Integer", "Elem"}},
	{"myInt16", []string{"Integer", "Elem"}},
	{"uint16", []string{"Integer", "Elem"}},
	{"myUint16", nil}, // defined on uint16: neither an integer nor a float
	{"int32", []string{"Integer", "Elem"}},
	{"uint32", []string{"Integer", "Elem"}},
	{"int64", []string{"Integer", "Elem"}},
	{"uint64", []string{"Integer", "Elem"}},
	{"Float16", []string{"Elem"}},
	{"BFloat16", []string{"Elem"}},
	{"Float8E4M3", []string{"Elem"}}, // one byte, and not admitted by Integer's ~uint8
	{"Float8E5M2", []string{"Elem"}},
	{"struct{ bits uint8 }", nil}, // the fp8 types' underlying type is not an element type
	{"int", nil},
	{"uint", nil},
	{"uintptr", nil},
	{"bool", nil},
	{"complex64", nil},
}

func TestTypeSets(t *testing.T) {
	text, err := os.ReadFile("types.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", text, 0)
	if err != nil {
		t.Fatal(err)
	}
	var decls []string
	found := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			for _, name := range typeSetDecls {
				if ts.Name.Name == name {
					found[name] = true
					decls = append(decls, "type "+string(text[fset.Position(ts.Pos()).Offset:fset.Position(ts.End()).Offset]))
				}
			}
		}
	}
	for _, name := range typeSetDecls {
		if !found[name] {
			t.Fatalf("types.go declares no type %s", name)
		}
	}
	constraints := []string{"Float", "Integer", "Elem"}
	var src strings.Builder
	src.WriteString("package p\n\n")
	src.WriteString(strings.Join(decls, "\n") + "\n")
	src.WriteString("type myFloat32 float32\ntype myUint8 uint8\ntype myInt16 int16\ntype myUint16 uint16\n")
	for _, c := range constraints {
		fmt.Fprintf(&src, "func take%s[T %s]() {}\n", c, c)
	}
	// One function per pair, so that each instantiation's error (or its
	// absence) is on a line of its own.
	type pair struct{ typ, c string }
	line := map[int]pair{}
	n := strings.Count(src.String(), "\n") + 1
	for _, tc := range typeSetCases {
		for _, c := range constraints {
			fmt.Fprintf(&src, "func _() { take%s[%s]() }\n", c, tc.typ)
			line[n] = pair{tc.typ, c}
			n++
		}
	}
	pf, err := parser.ParseFile(fset, "p.go", src.String(), 0)
	if err != nil {
		t.Fatalf("%v\n%s", err, src.String())
	}
	failed := map[pair]string{}
	conf := types.Config{Error: func(err error) {
		te := err.(types.Error)
		p, ok := line[te.Fset.Position(te.Pos).Line]
		if !ok {
			t.Errorf("unexpected error: %v", err)
			return
		}
		failed[p] = te.Msg
	}}
	conf.Check("p", fset, []*ast.File{pf}, nil) // the errors are reported to conf.Error
	for _, tc := range typeSetCases {
		for _, c := range constraints {
			want := false
			for _, in := range tc.in {
				want = want || in == c
			}
			msg, bad := failed[pair{tc.typ, c}]
			switch {
			case want && bad:
				t.Errorf("%s does not satisfy %s: %s", tc.typ, c, msg)
			case !want && !bad:
				t.Errorf("%s satisfies %s; the type set must not hold it", tc.typ, c)
			}
		}
	}
}

// TestDTypeOf: every element type maps to its backend type (a type defined
// on one maps as it does), with the size of the Go type.
func TestDTypeOf(t *testing.T) {
	type myInt16 int16
	type myByte byte
	check := func(name string, got backend.DType, size uintptr, want backend.DType) {
		t.Helper()
		if got != want {
			t.Errorf("dtypeOf[%s] = %v, want %v", name, got, want)
		}
		if got.Size() != int(size) {
			t.Errorf("dtypeOf[%s] = %v of %d bytes; the Go type has %d", name, got, got.Size(), size)
		}
	}
	check("float32", dtypeOf[float32](), 4, backend.F32)
	check("float64", dtypeOf[float64](), 8, backend.F64)
	check("int8", dtypeOf[int8](), 1, backend.I8)
	check("uint8", dtypeOf[uint8](), 1, backend.U8)
	check("myByte", dtypeOf[myByte](), 1, backend.U8)
	check("int16", dtypeOf[int16](), 2, backend.I16)
	check("myInt16", dtypeOf[myInt16](), 2, backend.I16)
	check("uint16", dtypeOf[uint16](), 2, backend.U16)
	check("int32", dtypeOf[int32](), 4, backend.I32)
	check("uint32", dtypeOf[uint32](), 4, backend.U32)
	check("int64", dtypeOf[int64](), 8, backend.I64)
	check("uint64", dtypeOf[uint64](), 8, backend.U64)
	check("Float16", dtypeOf[Float16](), 2, backend.Half)
	check("BFloat16", dtypeOf[BFloat16](), 2, backend.BFloat16)
	check("Float8E4M3", dtypeOf[Float8E4M3](), unsafe.Sizeof(Float8E4M3{}), backend.F8E4M3)
	check("Float8E5M2", dtypeOf[Float8E5M2](), unsafe.Sizeof(Float8E5M2{}), backend.F8E5M2)
	seen := map[backend.DType]bool{}
	for _, dt := range []backend.DType{dtypeOf[float32](), dtypeOf[float64](), dtypeOf[int8](), dtypeOf[uint8](),
		dtypeOf[int16](), dtypeOf[uint16](), dtypeOf[int32](), dtypeOf[uint32](), dtypeOf[int64](), dtypeOf[uint64](),
		dtypeOf[Float16](), dtypeOf[BFloat16](), dtypeOf[Float8E4M3](), dtypeOf[Float8E5M2]()} {
		seen[dt] = true
	}
	for dt := backend.DType(0); dt < backend.NumDTypes; dt++ {
		if !seen[dt] {
			t.Errorf("no element type maps to %v", dt)
		}
	}
}

// convElem is the element types a number converts to (every Elem but the
// fp8 types, which are structs).
type convElem interface {
	Float | Integer | Float16 | BFloat16
}
