package brokercore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/brokercore/brokercore"

// TestImportRules holds the library to ARCHITECTURE.md's import rules,
// read from the source of every package (production files; every file
// under examples/):
//   - store, lock, consumer and acl import no sibling; internal/ packages
//     import no library package but internal/ ones;
//   - pop, schedule, offset and txn import only store (and internal/), and
//     from store use the Message type and its errors only: storage is an
//     interface each declares;
//   - nothing imports the root package but brokertest (whose job is to
//     open a composed Broker for a test), and nothing imports examples/;
//   - no example imports internal/ (they are thin users of the public API).
func TestImportRules(t *testing.T) {
	siblingsOK := map[string][]string{
		"store": nil, "lock": nil, "consumer": nil, "acl": nil,
		"pop": {"store"}, "schedule": {"store"}, "offset": {"store"}, "txn": {"store"},
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		example := dir == "examples" || strings.HasPrefix(dir, "examples/")
		if !example && strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if msg := importRule(dir, example, p, siblingsOK); msg != "" {
				t.Errorf("%s imports %s: %s", path, p, msg)
			}
		}
		if _, ok := siblingsOK[dir]; ok && !example {
			for _, sel := range storeUses(f) {
				t.Errorf("%s uses store.%s: only store.Message and store's errors may be used here", path, sel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the walk missed the packages", checked)
	}
}

// importRule is what is wrong with dir importing p ("" = nothing).
func importRule(dir string, example bool, p string, siblingsOK map[string][]string) string {
	if p != modulePath && !strings.HasPrefix(p, modulePath+"/") {
		return ""
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case example:
		if top == "internal" {
			return "an example uses the public API only"
		}
		return ""
	case top == "examples":
		return "nothing in the library imports examples/"
	case rel == "":
		if dir != "brokertest" {
			return "nothing in the library imports the root package (brokertest excepted)"
		}
		return ""
	case strings.HasPrefix(dir, "internal/") || dir == "internal":
		if top != "internal" {
			return "internal/ packages import no library package"
		}
		return ""
	}
	if ok, listed := siblingsOK[dir]; listed && top != "internal" && !slices.Contains(ok, top) {
		return "not among this package's allowed siblings " + strings.Join(ok, ", ")
	}
	return ""
}

// storeUses lists what f takes from the store package beyond Message and
// its errors.
func storeUses(f *ast.File) []string {
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == modulePath+"/store" {
			name = "store"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
			s := sel.Sel.Name
			if s != "Message" && !strings.HasPrefix(s, "Err") && !strings.HasSuffix(s, "Error") {
				bad = append(bad, s)
			}
		}
		return true
	})
	return bad
}
