package layers

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers are Grove's layers, top to bottom: a package belongs to the
// layer of the longest prefix below that matches its directory, and may
// import packages of its own layer or of layers below it, never above.
var layers = []struct {
	name     string
	prefixes []string
}{
	{"programs", []string{"cmd", "processor", "it", "examples", "deploy"}},
	{"protocols", []string{"api"}},
	{"engine", []string{"actors"}},
	{"policy", []string{"cluster", "logging", "routing"}},
	{"config and transport", []string{"conf", "transport"}},
	{"foundations", []string{"auth", "servables", "tracing", "grovepb", "internal", "ui"}},
}

// layerOf returns the index in layers of package dir (a path relative to
// the module root), or -1 when no layer claims it.
func layerOf(dir string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.prefixes {
			if (dir == p || strings.HasPrefix(dir, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// modulePath reads the module path from go.mod in root.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// imports maps each package directory of the module under root
// (relative, slash-separated) to the module packages its Go files import,
// its own test files included, each with the file that imports it first.
// An external test package (package x_test) is left out: nothing can
// import it, and it tests its package from above, as a program would.
func imports(t *testing.T, root, module string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || isModule(p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			to, ok := strings.CutPrefix(ip, module+"/")
			if !ok {
				continue
			}
			if out[dir] == nil {
				out[dir] = map[string]string{}
			}
			if _, seen := out[dir][to]; !seen {
				out[dir][to] = filepath.ToSlash(rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isModule reports whether directory p holds a module of its own (its
// packages are not Grove's: deploy/check).
func isModule(p string) bool {
	_, err := os.Stat(filepath.Join(p, "go.mod"))
	return err == nil
}

// TestNoPackageImportsUpward: no package of Grove imports a package of a
// higher layer; every package belongs to a layer.
func TestNoPackageImportsUpward(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	graph := imports(t, root, modulePath(t, root))
	if len(graph) < 20 {
		t.Fatalf("found imports in only %d packages under %s: is the walk broken?", len(graph), root)
	}
	for _, from := range slices.Sorted(mapsKeys(graph)) {
		lf := layerOf(from)
		if lf < 0 {
			t.Errorf("package %s is in no layer: add its folder to layers (and docs/architecture.md)", from)
			continue
		}
		for _, to := range slices.Sorted(mapsKeys(graph[from])) {
			lt := layerOf(to)
			if lt < 0 {
				t.Errorf("package %s is in no layer: add its folder to layers (and docs/architecture.md)", to)
				continue
			}
			if lt < lf {
				t.Errorf("%s imports %s: the %s layer may not import the %s layer above it (%s)",
					from, to, layers[lf].name, layers[lt].name, graph[from][to])
			}
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestLayerOf pins the layer of packages whose folder names could
// mislead: a protocol's generated code is the protocol's, the transport
// sits beside conf, the deprecated alias of grovepb is under api, a
// cluster node's agent (actors/node), which drives the engine, is the
// engine's, and the arithmetic of quality (routing/quality) is policy.
func TestLayerOf(t *testing.T) {
	for dir, want := range map[string]string{
		"cmd/grovebench":            "programs",
		"processor":                 "programs",
		"api/oip/oippb":             "protocols",
		"api/grovepb":               "protocols",
		"actors/lifecycle":          "engine",
		"actors/node":               "engine",
		"routing/quality":           "policy",
		"cluster/forward/forwardpb": "policy",
		"logging/audit":             "policy",
		"transport/httpserver":      "config and transport",
		"conf/bucket/s3":            "config and transport",
		"grovepb":                   "foundations",
		"internal/jsondoc":          "foundations",
		"auth":                      "foundations",
	} {
		if i := layerOf(dir); i < 0 || layers[i].name != want {
			t.Errorf("layerOf(%q) = %d, want the %s layer", dir, i, want)
		}
	}
	if i := layerOf("apiary"); i != -1 {
		t.Errorf("layerOf(apiary) = %d: a prefix must match a whole folder name", i)
	}
}
