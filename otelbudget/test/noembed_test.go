package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbiddenEmbeds are the packages whose types make an implementation of
// the OpenTelemetry API compile today and silently do nothing (or stop
// compiling) when the API adds a method. A wrapper embeds the real
// interface value (trace.Span, trace.Tracer, …) instead, so that every
// method it does not override delegates.
var forbiddenEmbeds = []string{
	"go.opentelemetry.io/otel/trace/embedded",
	"go.opentelemetry.io/otel/metric/embedded",
}

// embedsForbidden returns, for one Go source file, the struct types that
// embed a type of a forbidden package, as "file:line: Type embeds path.Name".
func embedsForbidden(fset *token.FileSet, f *ast.File) []string {
	forbidden := map[string]string{} // local import name -> path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbiddenEmbeds {
			if path != bad {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			forbidden[name] = path
		}
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, field := range st.Fields.List {
			if len(field.Names) > 0 {
				continue
			}
			typ := field.Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			sel, ok := typ.(*ast.SelectorExpr)
			if !ok {
				continue
			}
			if x, ok := sel.X.(*ast.Ident); ok && forbidden[x.Name] != "" {
				found = append(found, fset.Position(field.Pos()).String()+": "+ts.Name.Name+" embeds "+forbidden[x.Name]+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return found
}

// TestNoEmbeddedAPITypes parses every Go file of the root module (the
// nested modules, which have their own go.mod, excepted) and fails if a
// type embeds go.opentelemetry.io/otel/trace/embedded or metric/embedded.
func TestNoEmbeddedAPITypes(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files int
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		found = append(found, embedsForbidden(fset, f)...)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 20, "the walk reached the root module's sources")
	assert.Empty(t, found, "wrappers embed the real interface value, never an embedded.* type")
}

// TestNoEmbeddedAPITypesCatches: the check finds an embedding, renamed
// import and pointer included.
func TestNoEmbeddedAPITypesCatches(t *testing.T) {
	const src = `package p

import (
	"go.opentelemetry.io/otel/trace"
	emb "go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/metric/embedded"
)

type good struct{ trace.Span }
type bad1 struct{ emb.Span }
type bad2 struct {
	*embedded.Meter
	n int
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	found := embedsForbidden(fset, f)
	require.Len(t, found, 2)
	assert.Contains(t, found[0], "bad1 embeds go.opentelemetry.io/otel/trace/embedded.Span")
	assert.Contains(t, found[1], "bad2 embeds go.opentelemetry.io/otel/metric/embedded.Meter")
}
