//go:build !race

// Built without -race only so that it runs once: the race and the plain
// runs of this package would build the same scratch modules twice.

package rmqtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goModLines returns the go.mod fragment of a README: its fenced block
// that starts with "require "+module, with /path/to/brokercore (the
// README's name for a clone) replaced by root.
func goModLines(t *testing.T, readme, module, root string) string {
	t.Helper()
	raw, err := os.ReadFile(readme)
	require.NoError(t, err)
	var block []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, block = true, nil
		case in && line == "```":
			in = false
			if b := strings.Join(block, "\n") + "\n"; strings.HasPrefix(b, "require "+module+" ") {
				return strings.ReplaceAll(b, "/path/to/brokercore", root)
			}
		case in:
			block = append(block, line)
		}
	}
	t.Fatalf("%s has no go.mod block starting with require %s", readme, module)
	return ""
}

// scratch writes a module with the given go.mod lines and files and runs
// go vet in it (which builds its packages and tests) with no network: the
// module cache this module's own build filled is all it may use.
func scratch(t *testing.T, gomod string, files map[string]string) (string, error) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/scratch\n\ngo 1.26.0\n\n"+gomod), 0o644))
	// What go mod tidy would fetch: this module's and the Watermill
	// adapter's dependencies hold every module the scratch builds need.
	var sum []byte
	for _, f := range []string{"../go.sum", "../../watermill/go.sum"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sum = append(sum, b...)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	cmd := exec.Command(goBin, "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const libraryMain = `package main

import (
	"fmt"
	"os"

	"github.com/brokercore/brokercore"
)

func main() {
	dir, _ := os.MkdirTemp("", "scratch")
	defer os.RemoveAll(dir)
	b, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Close())
}
`

const libraryTest = `package main

import (
	"testing"

	"github.com/brokercore/brokercore/brokertest"
)

func TestCore(t *testing.T) { _ = brokertest.New(t) }
`

const watermillMain = `package main

import (
	"os"

	brokercore "github.com/brokercore/brokercore/examples/watermill"
)

func main() {
	dir, _ := os.MkdirTemp("", "scratch")
	defer os.RemoveAll(dir)
	pub, sub, err := brokercore.NewPubSub(brokercore.Config{Dir: dir, ConsumerGroup: "billing"})
	if err != nil {
		panic(err)
	}
	_ = sub.Close()
	_ = pub.Close()
}
`

const rmqtestTest = `package main

import (
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestBroker(t *testing.T) { _ = rmqtest.Start(t).NameSrv }
`

// TestImportFromAnotherModule builds, from this checkout, a module that
// uses the library and brokertest with the root README's go.mod lines, one
// that uses rmqtest with this module's README's lines, and one that uses the
// Watermill adapter with its README's lines; and shows why
// the second needs both replace lines: with only its own, Go looks the
// library up at the placeholder version, which no server has.
func TestImportFromAnotherModule(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	lib := goModLines(t, filepath.Join(root, "README.md"), "github.com/brokercore/brokercore", root)
	rmq := goModLines(t, "../README.md", "github.com/brokercore/brokercore/examples/rocketmq", root)

	t.Run("library and brokertest", func(t *testing.T) {
		out, err := scratch(t, lib, map[string]string{"main.go": libraryMain, "main_test.go": libraryTest})
		require.NoError(t, err, out)
	})
	t.Run("rmqtest", func(t *testing.T) {
		out, err := scratch(t, rmq, map[string]string{"main.go": libraryMain, "main_test.go": libraryTest, "rmq_test.go": rmqtestTest})
		require.NoError(t, err, out)
	})
	t.Run("watermill", func(t *testing.T) {
		wm := goModLines(t, filepath.Join(root, "examples/watermill/README.md"), "github.com/brokercore/brokercore/examples/watermill", root)
		out, err := scratch(t, wm, map[string]string{"main.go": watermillMain})
		if err != nil && strings.Contains(out, "lookup disabled by GOPROXY=off") && !strings.Contains(out, "brokercore@") {
			t.Skipf("the module cache lacks Watermill's dependencies (run examples/watermill's tests first, as ./test.sh does):\n%s", out)
		}
		require.NoError(t, err, out)
	})
	t.Run("rmqtest with one replace line", func(t *testing.T) {
		one := "require github.com/brokercore/brokercore/examples/rocketmq v0.0.0-00010101000000-000000000000\n\n" +
			"replace github.com/brokercore/brokercore/examples/rocketmq => " + filepath.Join(root, "examples/rocketmq") + "\n"
		out, err := scratch(t, one, map[string]string{"main_test.go": rmqtestTest})
		require.Error(t, err)
		require.Contains(t, out, "github.com/brokercore/brokercore v0.0.0-00010101000000-000000000000", "Go looks the library up at the placeholder version")
	})
}
