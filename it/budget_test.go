package it

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// itParallel is how many integration tests make test runs at once
// (go test's -parallel in the Makefile's test target).
const itParallel = 4

// itShare is the integration tests' share of make test's 20 minutes on a
// fresh machine: the installs, the builds, the other packages' tests and
// the processor's C test take the rest (make test took 13 minutes in all
// on the 2-core development machine, installs already done).
const itShare = 12*time.Minute + 15*time.Second

var budgetRE = regexp.MustCompile(`Budget: (\d+) s\.`)

// TestEveryIntegrationTestHasABudgetThatFitsMakeTest reads this package's
// tests: each says its time budget in its doc comment ("Budget: N s."),
// and each either calls t.Parallel() first or says in its doc comment why
// it runs alone (it measures time, latency or RSS, or needs the machine).
// The tests that run alone, plus the parallel ones shared among
// itParallel at a time, must fit in itShare: a new integration test that
// does not fit fails here, not on a fresh machine's CI. Budget: 1 s.
func TestEveryIntegrationTestHasABudgetThatFitsMakeTest(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "-parallel " + strconv.Itoa(itParallel); !strings.Contains(string(mk), want) {
		t.Errorf("the Makefile's test target does not run go test with %s (itParallel)", want)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(), "it", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var alone, parallel time.Duration
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			at := fset.Position(fn.Pos())
			doc := fn.Doc.Text()
			m := budgetRE.FindStringSubmatch(doc)
			if m == nil {
				t.Errorf("%s (%s:%d): no \"Budget: N s.\" in its doc comment", fn.Name.Name, filepath.Base(at.Filename), at.Line)
				continue
			}
			secs, _ := strconv.Atoi(m[1])
			budget := time.Duration(secs) * time.Second
			switch {
			case callsParallelFirst(fn):
				parallel += budget
			case strings.Contains(doc, "runs alone"):
				alone += budget
			default:
				t.Errorf("%s (%s:%d): neither calls t.Parallel() first nor says in its doc comment why it runs alone",
					fn.Name.Name, filepath.Base(at.Filename), at.Line)
			}
		}
	}
	total := alone + parallel/itParallel
	t.Logf("budgets: %v alone + %v in parallel (%d at a time) = %v of %v", alone, parallel, itParallel, total, itShare)
	if total > itShare {
		t.Errorf("the integration tests' budgets come to %v (%v alone + %v/%d in parallel), over their %v share of make test",
			total, alone, parallel, itParallel, itShare)
	}
}

// callsParallelFirst reports whether fn's first statement is t.Parallel().
func callsParallelFirst(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	es, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel"
}
