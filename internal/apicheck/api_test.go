package apicheck

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// packages are the package directories, relative to the module root, whose
// exported API is checked. A directory that does not exist is skipped.
var packages = []string{"collective", "ddp", "diag", "backend", "host", "vulkan", "mpi"}

// alsoTagged are packages built differently under build tags, with the tags
// of each other build: its exported API must be the default build's, line
// for line (mpi: the MPI binding with -tags mpi; the golden file holds the
// default build's API, whose stubs fail without MPI).
var alsoTagged = map[string][][]string{"mpi": {{"mpi"}, {"mpi", "mpich"}, {"mpi", "mpicustom"}}}

var update = flag.Bool("update", false, "rewrite the golden files in api/ instead of comparing with them")

const regenerate = "go test ./internal/apicheck -update"

func TestAPI(t *testing.T) {
	root := moduleRoot(t)
	for _, pkg := range packages {
		t.Run(pkg, func(t *testing.T) {
			dir := filepath.Join(root, filepath.FromSlash(pkg))
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Logf("%s: no such package directory, skipped", pkg)
				return
			}
			lines, err := apiLines(pkg, dir, nil)
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				t.Logf("%s: no Go files for linux/amd64 with cgo, skipped", pkg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tags := range alsoTagged[pkg] {
				tagged, err := apiLines(pkg, dir, tags)
				if err != nil {
					t.Fatalf("-tags %s: %v", strings.Join(tags, ","), err)
				}
				added, removed := diff(tagged, lines)
				if len(added)+len(removed) == 0 {
					continue
				}
				var b strings.Builder
				fmt.Fprintf(&b, "exported API of package %s built with -tags %s differs from the default build's (+ only with the tags, - only without):\n", pkg, strings.Join(tags, ","))
				for _, l := range removed {
					fmt.Fprintf(&b, "\t- %s\n", l)
				}
				for _, l := range added {
					fmt.Fprintf(&b, "\t+ %s\n", l)
				}
				b.WriteString("Every build must declare the same API (the mpi package: once, in api.go, over each build's implementation)")
				t.Error(b.String())
			}
			got := strings.Join(lines, "\n") + "\n"
			if len(lines) == 0 {
				got = ""
			}
			rel := "api/" + strings.ReplaceAll(pkg, "/", "_") + ".txt"
			golden := filepath.Join(root, filepath.FromSlash(rel))
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s (%d lines)", rel, len(lines))
				return
			}
			data, err := os.ReadFile(golden)
			if errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s is missing (package %s has %d exported API lines); create it with:\n\t%s", rel, pkg, len(lines), regenerate)
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(data) == got {
				return
			}
			added, removed := diff(lines, splitLines(string(data)))
			var b strings.Builder
			fmt.Fprintf(&b, "exported API of package %s differs from %s (+ in the code, not in the file; - in the file, not in the code):\n", pkg, rel)
			for _, l := range removed {
				fmt.Fprintf(&b, "\t- %s\n", l)
			}
			for _, l := range added {
				fmt.Fprintf(&b, "\t+ %s\n", l)
			}
			if len(added) == 0 && len(removed) == 0 {
				fmt.Fprintf(&b, "\t(same lines, but the file is not sorted, has duplicates or blank lines)\n")
			}
			fmt.Fprintf(&b, "If the change is intended, regenerate the golden files and commit them:\n\t%s", regenerate)
			t.Error(b.String())
		})
	}
}

// moduleRoot returns the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

func splitLines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimRight(l, "\r\n"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// diff returns the lines of got that are not in want (added) and those of
// want that are not in got (removed), each sorted.
func diff(got, want []string) (added, removed []string) {
	in := func(s []string) map[string]bool {
		m := make(map[string]bool, len(s))
		for _, l := range s {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	for l := range g {
		if !w[l] {
			added = append(added, l)
		}
	}
	for l := range w {
		if !g[l] {
			removed = append(removed, l)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// apiLines returns the sorted, de-duplicated API lines of the package in dir,
// named pkg in the lines, as built with tags.
func apiLines(pkg, dir string, tags []string) ([]string, error) {
	ctxt := build.Default
	ctxt.GOOS, ctxt.GOARCH, ctxt.CgoEnabled = "linux", "amd64", true
	ctxt.BuildTags = tags
	bp, err := ctxt.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	files := slices.Concat(bp.GoFiles, bp.CgoFiles)
	slices.Sort(files)
	fset := token.NewFileSet()
	w := &walker{fset: fset, prefix: "pkg " + pkg + ", "}
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		w.file(f)
	}
	slices.Sort(w.lines)
	return slices.Compact(w.lines), nil
}

type walker struct {
	fset   *token.FileSet
	prefix string
	lines  []string
	iota   int // value of iota while printing a constant's value, or -1
}

func (w *walker) emit(format string, args ...any) {
	w.lines = append(w.lines, w.prefix+fmt.Sprintf(format, args...))
}

func (w *walker) file(f *ast.File) {
	w.iota = -1
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			w.funcDecl(d)
		case *ast.GenDecl:
			switch d.Tok {
			case token.TYPE:
				for _, s := range d.Specs {
					w.typeSpec(s.(*ast.TypeSpec))
				}
			case token.CONST:
				w.constDecl(d)
			case token.VAR:
				for _, s := range d.Specs {
					w.varSpec(s.(*ast.ValueSpec))
				}
			}
		}
	}
}

func (w *walker) funcDecl(d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	if d.Recv == nil {
		w.emit("func %s%s%s", d.Name.Name, w.typeParams(d.Type.TypeParams), w.signature(d.Type))
		return
	}
	if len(d.Recv.List) != 1 {
		return
	}
	recv := d.Recv.List[0].Type
	if !ast.IsExported(baseName(recv)) {
		return
	}
	w.emit("method (%s) %s%s", w.expr(recv), d.Name.Name, w.signature(d.Type))
}

// baseName returns the name of the type of a receiver or embedded field:
// T for T, *T, T[P], pkg.T.
func baseName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		default:
			return ""
		}
	}
}

func (w *walker) typeSpec(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	name := s.Name.Name + w.typeParams(s.TypeParams)
	if s.Assign.IsValid() {
		w.emit("type %s = %s", name, w.expr(s.Type))
		return
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		w.emit("type %s struct", name)
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if ast.IsExported(baseName(f.Type)) {
					w.emit("type %s struct, embedded %s", name, w.expr(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					w.emit("type %s struct, %s %s", name, n.Name, w.expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		w.emit("type %s interface", name)
		unexported := false
		for _, m := range t.Methods.List {
			switch {
			case len(m.Names) == 0:
				// An embedded interface or a type-set element.
				w.emit("type %s interface, %s", name, w.expr(m.Type))
			case m.Names[0].IsExported():
				w.emit("type %s interface, %s%s", name, m.Names[0].Name, w.signature(m.Type.(*ast.FuncType)))
			default:
				unexported = true
			}
		}
		if unexported {
			w.emit("type %s interface, unexported methods", name)
		}
	default:
		w.emit("type %s %s", name, w.expr(s.Type))
	}
}

func (w *walker) constDecl(d *ast.GenDecl) {
	// In a parenthesized group a spec without type and values repeats the
	// previous spec's type and values, with iota advanced.
	var typ ast.Expr
	var values []ast.Expr
	for i, spec := range d.Specs {
		s := spec.(*ast.ValueSpec)
		if s.Type != nil || len(s.Values) > 0 {
			typ, values = s.Type, s.Values
		}
		for j, n := range s.Names {
			if !n.IsExported() {
				continue
			}
			var val ast.Expr
			if j < len(values) {
				val = values[j]
			}
			switch {
			case typ != nil && isLiteral(val):
				w.emit("const %s %s = %s", n.Name, w.expr(typ), w.expr(val))
			case typ != nil:
				w.emit("const %s %s", n.Name, w.expr(typ))
			case val != nil:
				w.iota = i
				w.emit("const %s = %s", n.Name, w.expr(val))
				w.iota = -1
			default:
				w.emit("const %s", n.Name)
			}
		}
	}
}

// isLiteral reports whether e is a basic literal, possibly signed.
func isLiteral(e ast.Expr) bool {
	if u, ok := e.(*ast.UnaryExpr); ok && (u.Op == token.SUB || u.Op == token.ADD) {
		e = u.X
	}
	_, ok := e.(*ast.BasicLit)
	return ok
}

func (w *walker) varSpec(s *ast.ValueSpec) {
	for i, n := range s.Names {
		if !n.IsExported() {
			continue
		}
		switch {
		case s.Type != nil:
			w.emit("var %s %s", n.Name, w.expr(s.Type))
		case len(s.Values) == len(s.Names):
			w.emit("var %s%s", n.Name, w.valueType(s.Values[i]))
		case len(s.Values) == 1:
			// var a, b = f(): print the call and the position.
			w.emit("var %s = %s (result %d)", n.Name, w.expr(s.Values[0]), i)
		default:
			w.emit("var %s", n.Name)
		}
	}
}

// valueType describes the type of an untyped var from its initializer: the
// type where the initializer shows it, else " = " and the expression.
func (w *walker) valueType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok {
				switch pkg.Name + "." + sel.Sel.Name {
				case "errors.New", "fmt.Errorf":
					return " error"
				}
			}
		}
	case *ast.CompositeLit:
		if x.Type != nil {
			return " " + w.expr(x.Type)
		}
	case *ast.UnaryExpr:
		if c, ok := x.X.(*ast.CompositeLit); ok && x.Op == token.AND && c.Type != nil {
			return " *" + w.expr(c.Type)
		}
	case *ast.FuncLit:
		return " func" + w.signature(x.Type)
	}
	return " = " + w.expr(e)
}

// typeParams prints a type parameter list with the names kept, one
// constraint per name: [K comparable, V any].
func (w *walker) typeParams(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	var parts []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			parts = append(parts, n.Name+" "+w.expr(f.Type))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// types prints the types of a parameter or result list, names dropped, one
// type per name.
func (w *walker) types(fl *ast.FieldList) []string {
	if fl == nil {
		return nil
	}
	var out []string
	for _, f := range fl.List {
		t := w.expr(f.Type)
		for range max(1, len(f.Names)) {
			out = append(out, t)
		}
	}
	return out
}

// signature prints a function type without the func keyword and without
// parameter names: (int, ...string) (T, error).
func (w *walker) signature(ft *ast.FuncType) string {
	s := "(" + strings.Join(w.types(ft.Params), ", ") + ")"
	switch res := w.types(ft.Results); len(res) {
	case 0:
	case 1:
		s += " " + res[0]
	default:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}

// expr prints a type or expression on one line.
func (w *walker) expr(e ast.Expr) string {
	switch x := e.(type) {
	case nil:
		return ""
	case *ast.Ident:
		if x.Name == "iota" && w.iota >= 0 {
			return strconv.Itoa(w.iota)
		}
		return x.Name
	case *ast.BasicLit:
		return x.Value
	case *ast.SelectorExpr:
		return w.expr(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + w.expr(x.X)
	case *ast.ParenExpr:
		return "(" + w.expr(x.X) + ")"
	case *ast.UnaryExpr:
		return x.Op.String() + w.expr(x.X)
	case *ast.BinaryExpr:
		return w.expr(x.X) + " " + x.Op.String() + " " + w.expr(x.Y)
	case *ast.Ellipsis:
		return "..." + w.expr(x.Elt)
	case *ast.ArrayType:
		if x.Len == nil {
			return "[]" + w.expr(x.Elt)
		}
		return "[" + w.expr(x.Len) + "]" + w.expr(x.Elt)
	case *ast.MapType:
		return "map[" + w.expr(x.Key) + "]" + w.expr(x.Value)
	case *ast.ChanType:
		switch x.Dir {
		case ast.SEND:
			return "chan<- " + w.expr(x.Value)
		case ast.RECV:
			return "<-chan " + w.expr(x.Value)
		}
		if c, ok := x.Value.(*ast.ChanType); ok && c.Dir == ast.RECV {
			return "chan (" + w.expr(x.Value) + ")"
		}
		return "chan " + w.expr(x.Value)
	case *ast.FuncType:
		return "func" + w.typeParams(x.TypeParams) + w.signature(x)
	case *ast.StructType:
		var fields []string
		for _, f := range x.Fields.List {
			var names []string
			for _, n := range f.Names {
				names = append(names, n.Name)
			}
			s := w.expr(f.Type)
			if len(names) > 0 {
				s = strings.Join(names, ", ") + " " + s
			}
			if f.Tag != nil {
				s += " " + f.Tag.Value
			}
			fields = append(fields, s)
		}
		return "struct{" + strings.Join(fields, "; ") + "}"
	case *ast.InterfaceType:
		var elems []string
		for _, m := range x.Methods.List {
			if len(m.Names) == 0 {
				elems = append(elems, w.expr(m.Type))
				continue
			}
			elems = append(elems, m.Names[0].Name+w.signature(m.Type.(*ast.FuncType)))
		}
		return "interface{" + strings.Join(elems, "; ") + "}"
	case *ast.IndexExpr:
		return w.expr(x.X) + "[" + w.expr(x.Index) + "]"
	case *ast.IndexListExpr:
		return w.expr(x.X) + "[" + w.exprs(x.Indices) + "]"
	case *ast.CallExpr:
		args := w.exprs(x.Args)
		if x.Ellipsis.IsValid() {
			args += "..."
		}
		return w.expr(x.Fun) + "(" + args + ")"
	case *ast.CompositeLit:
		if len(x.Elts) == 0 {
			return w.expr(x.Type) + "{}"
		}
		return w.expr(x.Type) + "{...}"
	case *ast.FuncLit:
		return "func" + w.signature(x.Type) + " {...}"
	case *ast.KeyValueExpr:
		return w.expr(x.Key) + ": " + w.expr(x.Value)
	case *ast.TypeAssertExpr:
		if x.Type == nil {
			return w.expr(x.X) + ".(type)"
		}
		return w.expr(x.X) + ".(" + w.expr(x.Type) + ")"
	case *ast.SliceExpr:
		s := w.expr(x.X) + "[" + w.expr(x.Low) + ":" + w.expr(x.High)
		if x.Slice3 {
			s += ":" + w.expr(x.Max)
		}
		return s + "]"
	}
	// Anything else: go/printer's form, whitespace collapsed to one line.
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, w.fset, e); err != nil {
		return fmt.Sprintf("<%T>", e)
	}
	return strings.Join(strings.Fields(buf.String()), " ")
}

func (w *walker) exprs(list []ast.Expr) string {
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = w.expr(e)
	}
	return strings.Join(parts, ", ")
}
