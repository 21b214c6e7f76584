package brokercore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestScriptCoversEveryModule: the README says ./test.sh runs every
// module's tests and .ci/run runs exactly it. A module added under
// examples/ without a line in test.sh would silently go untested.
func TestTestScriptCoversEveryModule(t *testing.T) {
	script, err := os.ReadFile("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || path == "go.mod" {
			return nil
		}
		dir := filepath.Dir(path)
		for _, step := range []string{"step " + dir + " go vet ./...", "step " + dir + " go test "} {
			if !strings.Contains(string(script), step) {
				t.Errorf("test.sh has no %q: module %s is not tested", step, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n./test.sh\n") {
		t.Error(".ci/run does not run ./test.sh")
	}
}

// TestREADMEsAreShort: every README is user documentation of at most 250
// lines; measurements live in BENCHMARKS.md, their history in git.
func TestREADMEsAreShort(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if d.Name() != "README.md" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := strings.Count(string(raw), "\n"); n > 250 {
			t.Errorf("%s has %d lines, more than 250", path, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
