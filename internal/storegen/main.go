// Command storegen writes package intercept's Store: a vdibroker.Store that
// implements every method of the interface explicitly (no embedding), each
// calling one hook around the wrapped store's method. A method added to
// vdibroker.Store (or to one of the interfaces it embeds) is then wrapped
// once `go generate ./intercept` has run, and until then the wrapper does
// not compile; TestGeneratedStoreIsCurrent fails while the file is stale.
//
// It reads the root package's source with go/parser: the Store interface,
// the interfaces it embeds (in the order they are written), and the
// package's type names, which it qualifies as vdibroker.Name.
//
// Usage (intercept/doc.go's go:generate line):
//
//	go run ../internal/storegen -root .. -o store_gen.go
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	root := flag.String("root", "..", "directory of package vdibroker")
	out := flag.String("o", "store_gen.go", "file to write")
	flag.Parse()
	src, err := generate(*root)
	if err != nil {
		log.Fatalf("storegen: %v", err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatalf("storegen: %v", err)
	}
}

// method is one method of the interface, its types written as the
// generated file spells them.
type method struct {
	name     string
	params   []param
	results  []string // types; the last is error
	variadic bool     // the last param is ...T (its type is written T)
	withCtx  bool     // the first param is a context.Context
}

type param struct{ name, typ string }

// generate returns the formatted source of package intercept's Store for
// the vdibroker package in dir.
func generate(dir string) ([]byte, error) {
	pkg, err := parseRoot(dir)
	if err != nil {
		return nil, err
	}
	methods, err := pkg.methods("Store", map[string]bool{})
	if err != nil {
		return nil, err
	}
	return render(methods, pkg.used)
}

// rootPackage is the parsed vdibroker package.
type rootPackage struct {
	types map[string]*ast.TypeSpec
	// imports maps, per type's file, a package name to its import path.
	imports map[*ast.TypeSpec]map[string]string
	// used are the import paths the methods' types use.
	used map[string]bool
}

func parseRoot(dir string) (*rootPackage, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &rootPackage{types: map[string]*ast.TypeSpec{}, imports: map[*ast.TypeSpec]map[string]string{}, used: map[string]bool{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "vdibroker" {
			return nil, fmt.Errorf("%s: package %s, want vdibroker", name, f.Name.Name)
		}
		imports := map[string]string{}
		for _, is := range f.Imports {
			path, _ := strconv.Unquote(is.Path.Value)
			local := filepath.Base(path)
			if is.Name != nil {
				local = is.Name.Name
			}
			imports[local] = path
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				p.types[ts.Name.Name] = ts
				p.imports[ts] = imports
			}
		}
	}
	if p.types["Store"] == nil {
		return nil, fmt.Errorf("no type Store in %s", dir)
	}
	return p, nil
}

// methods lists interface name's methods, those of the interfaces it
// embeds in their place.
func (p *rootPackage) methods(name string, seen map[string]bool) ([]method, error) {
	ts := p.types[name]
	if ts == nil {
		return nil, fmt.Errorf("embedded interface %s is not declared in package vdibroker", name)
	}
	it, ok := ts.Type.(*ast.InterfaceType)
	if !ok {
		return nil, fmt.Errorf("%s is not an interface", name)
	}
	var out []method
	for _, f := range it.Methods.List {
		if len(f.Names) == 0 {
			id, ok := f.Type.(*ast.Ident)
			if !ok {
				return nil, fmt.Errorf("%s embeds %T; only interfaces of package vdibroker are supported", name, f.Type)
			}
			ms, err := p.methods(id.Name, seen)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
			continue
		}
		m, err := p.method(ts, f.Names[0].Name, f.Type.(*ast.FuncType))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", name, f.Names[0].Name, err)
		}
		if seen[m.name] {
			return nil, fmt.Errorf("method %s declared twice", m.name)
		}
		seen[m.name] = true
		out = append(out, m)
	}
	return out, nil
}

// reserved are the generated code's own names (and its packages'), which a
// parameter may not take.
var reserved = []string{"s", "err", "context", "vdibroker"}

func (p *rootPackage) method(ts *ast.TypeSpec, name string, ft *ast.FuncType) (method, error) {
	m := method{name: name}
	for i, f := range fieldList(ft.Params) {
		typ := f.Type
		if e, ok := typ.(*ast.Ellipsis); ok {
			m.variadic, typ = true, e.Elt
		}
		s, err := p.typeString(ts, typ)
		if err != nil {
			return m, err
		}
		names := f.Names
		if len(names) == 0 {
			names = []*ast.Ident{nil}
		}
		for _, n := range names {
			pn := fmt.Sprintf("a%d", len(m.params))
			if n != nil && n.Name != "_" {
				pn = n.Name
			}
			if slices.Contains(reserved, pn) || strings.HasPrefix(pn, "r") && isDigits(pn[1:]) {
				return m, fmt.Errorf("parameter %s: the generated code uses that name", pn)
			}
			m.params = append(m.params, param{pn, s})
		}
		if i == 0 && s == "context.Context" {
			m.withCtx = true
		}
	}
	for _, f := range fieldList(ft.Results) {
		s, err := p.typeString(ts, f.Type)
		if err != nil {
			return m, err
		}
		for range max(len(f.Names), 1) {
			m.results = append(m.results, s)
		}
	}
	if len(m.results) == 0 || m.results[len(m.results)-1] != "error" {
		return m, fmt.Errorf("its last result is not an error: the hook cannot report it")
	}
	return m, nil
}

func fieldList(l *ast.FieldList) []*ast.Field {
	if l == nil {
		return nil
	}
	return l.List
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// typeString writes a type of the interface declared by ts as the
// generated file spells it: the package's own types qualified.
func (p *rootPackage) typeString(ts *ast.TypeSpec, e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.Ident:
		if p.types[e.Name] != nil {
			return "vdibroker." + e.Name, nil
		}
		if types.Universe.Lookup(e.Name) != nil {
			return e.Name, nil
		}
		return "", fmt.Errorf("unknown type %s", e.Name)
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok || p.imports[ts][pkg.Name] == "" {
			return "", fmt.Errorf("type %s.%s: unknown package", pkg, e.Sel.Name)
		}
		if pkg.Name != filepath.Base(p.imports[ts][pkg.Name]) {
			return "", fmt.Errorf("type %s.%s: renamed imports are not supported", pkg.Name, e.Sel.Name)
		}
		p.used[p.imports[ts][pkg.Name]] = true
		return pkg.Name + "." + e.Sel.Name, nil
	case *ast.StarExpr:
		s, err := p.typeString(ts, e.X)
		return "*" + s, err
	case *ast.ArrayType:
		s, err := p.typeString(ts, e.Elt)
		if e.Len != nil {
			return "", fmt.Errorf("array types are not supported")
		}
		return "[]" + s, err
	case *ast.MapType:
		k, err := p.typeString(ts, e.Key)
		if err != nil {
			return "", err
		}
		v, err := p.typeString(ts, e.Value)
		return "map[" + k + "]" + v, err
	case *ast.FuncType:
		var b strings.Builder
		b.WriteString("func(")
		for i, f := range fieldList(e.Params) {
			s, err := p.typeString(ts, f.Type)
			if err != nil {
				return "", err
			}
			for j := range max(len(f.Names), 1) {
				if i > 0 || j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(s)
			}
		}
		b.WriteString(")")
		var rs []string
		for _, f := range fieldList(e.Results) {
			s, err := p.typeString(ts, f.Type)
			if err != nil {
				return "", err
			}
			for range max(len(f.Names), 1) {
				rs = append(rs, s)
			}
		}
		switch len(rs) {
		case 0:
		case 1:
			b.WriteString(" " + rs[0])
		default:
			b.WriteString(" (" + strings.Join(rs, ", ") + ")")
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("type %T is not supported", e)
}

// render writes the generated file; imports are the import paths the
// methods' types use besides context and vdibroker.
func render(methods []method, imports map[string]bool) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`// Code generated by internal/storegen from the vdibroker.Store interface; DO NOT EDIT.

package intercept

import (
	"context"
`)
	for _, path := range slices.Sorted(maps.Keys(imports)) {
		if path != "context" {
			fmt.Fprintf(&b, "\t%q\n", path)
		}
	}
	b.WriteString(`
	"github.com/vdibroker/vdibroker"
)

// Store is a vdibroker.Store that runs each method of the store it wraps
// through its hook, with the method's name as the operation (Op...).
type Store struct {
	inner vdibroker.Store
	hook  Func
}

var _ vdibroker.Store = (*Store)(nil)

// NewStore returns inner with every method run through hook.
func NewStore(inner vdibroker.Store, hook Func) *Store {
	return &Store{inner: inner, hook: hook}
}

// The operations, one per method of vdibroker.Store.
const (
`)
	for _, m := range methods {
		fmt.Fprintf(&b, "\tOp%s = %q\n", m.name, m.name)
	}
	b.WriteString(")\n")
	for _, m := range methods {
		renderMethod(&b, m)
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the generated code: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

func renderMethod(b *bytes.Buffer, m method) {
	var params, args []string
	for i, p := range m.params {
		typ, arg := p.typ, p.name
		if m.variadic && i == len(m.params)-1 {
			typ, arg = "..."+typ, arg+"..."
		}
		params = append(params, p.name+" "+typ)
		args = append(args, arg)
	}
	// The hook's context, under the name of the method's own, reaches
	// the wrapped method; a method without one gets the background.
	hookCtx, innerCtx := "context.Background()", "context.Context"
	if m.withCtx {
		hookCtx = m.params[0].name
		innerCtx = m.params[0].name + " context.Context"
	}
	fmt.Fprintf(b, "\n// %s runs the wrapped store's %s through the hook.\n", m.name, m.name)
	values := m.results[:len(m.results)-1]
	if len(values) == 0 {
		fmt.Fprintf(b, "func (s *Store) %s(%s) error {\n", m.name, strings.Join(params, ", "))
		fmt.Fprintf(b, "\treturn s.hook(%s, Op%s, func(%s) error {\n", hookCtx, m.name, innerCtx)
		fmt.Fprintf(b, "\t\treturn s.inner.%s(%s)\n", m.name, strings.Join(args, ", "))
		b.WriteString("\t})\n}\n")
		return
	}
	var named, names []string
	for i, t := range values {
		names = append(names, fmt.Sprintf("r%d", i))
		named = append(named, fmt.Sprintf("r%d %s", i, t))
	}
	fmt.Fprintf(b, "func (s *Store) %s(%s) (%s, err error) {\n", m.name, strings.Join(params, ", "), strings.Join(named, ", "))
	fmt.Fprintf(b, "\terr = s.hook(%s, Op%s, func(%s) (err error) {\n", hookCtx, m.name, innerCtx)
	fmt.Fprintf(b, "\t\t%s, err = s.inner.%s(%s)\n", strings.Join(names, ", "), m.name, strings.Join(args, ", "))
	b.WriteString("\t\treturn err\n\t})\n")
	fmt.Fprintf(b, "\treturn %s, err\n}\n", strings.Join(names, ", "))
}
