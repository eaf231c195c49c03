package grovepb_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// exported lists the exported package-level names declared in the Go
// files of dir that match glob.
func exported(t *testing.T, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", glob, err)
	}
	var names []string
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !ast.IsExported(n) })
	slices.Sort(names)
	return names
}

// TestAliasesEveryExportedName: the deprecated package names every type
// and variable of the package it stands for, so that no consumer of the
// old import path loses a name it used.
func TestAliasesEveryExportedName(t *testing.T) {
	want := exported(t, "../../grovepb/*.pb.go")
	got := exported(t, "grovepb.go")
	if !slices.Equal(got, want) {
		t.Errorf("api/grovepb names %v\ngrovepb's generated code declares %v", got, want)
	}
}
