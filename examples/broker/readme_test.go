package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/schedule"
)

// TestEveryCurlLineOfTheREADME runs the README's shell lines in order
// against a broker on a loopback port: every `curl` (with -s, -d and
// --next), `VAR=value`, and `VAR=$(curl … | jq -r 'path')` that fills in a
// handle. Every answer must be a 2xx, and every field a `# {…}` line under
// a command shows must be in its answer — with the value shown, where one
// is shown instead of "…". Between code blocks the test clock moves 2 s, as
// a person reading along would take, and the test waits for the scheduler
// to deliver what became due.
func TestEveryCurlLineOfTheREADME(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	require.NoError(t, err)
	clock := newFakeClock()
	tb := startBroker(t, t.TempDir(), clock)
	sh := &readmeShell{t: t, vars: map[string]string{}}

	cmds := readmeCommands(string(raw))
	ran := 0
	block := -1
	for _, c := range cmds {
		if c.block != block {
			block = c.block
			clock.Advance(2 * time.Second)
			waitDelivered(t, tb.b)
		}
		if m := assignLit.FindStringSubmatch(c.line); m != nil {
			sh.vars[m[1]] = m[2]
			if m[1] == "B" {
				sh.vars["B"] = tb.url // the README's address is the default one
			}
			continue
		}
		answers := sh.run(c)
		ran++
		for i, want := range c.shown {
			require.Less(t, i, len(answers), "line %d: more answers shown than requests", c.lineNo)
			checkShown(t, c.lineNo, want, answers[i])
		}
	}
	assert.GreaterOrEqual(t, ran, 25, "the README's curl lines were not found")
}

// readmeCmd is one shell command of the README with the `# {…}` answer
// lines shown under it.
type readmeCmd struct {
	block, lineNo int
	line          string
	shown         []string
}

var (
	assignLit = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=([^$(\s]+)$`)
	assignJQ  = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=\$\((curl .*) \| jq -r '([^']*)'\)$`)
)

// readmeCommands returns the curl lines and variable assignments of the
// ```sh blocks, continuation lines joined.
func readmeCommands(md string) []readmeCmd {
	var out []readmeCmd
	in, block := false, 0
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```sh"):
			in, block = true, block+1
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if strings.HasPrefix(l, "# {") && len(out) > 0 {
			out[len(out)-1].shown = append(out[len(out)-1].shown, strings.TrimPrefix(l, "# "))
			continue
		}
		if !strings.HasPrefix(l, "curl ") && !assignLit.MatchString(l) && !strings.Contains(l, "=$(curl ") {
			continue
		}
		c := readmeCmd{block: block, lineNo: i + 1}
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, `\`) + strings.TrimSpace(lines[i])
			l = strings.Replace(l, "'--next", "' --next", 1)
		}
		c.line = l
		out = append(out, c)
	}
	return out
}

// readmeShell is the little of sh the README uses.
type readmeShell struct {
	t    *testing.T
	vars map[string]string
}

// run runs one command line and returns the decoded answer of each of its
// requests.
func (sh *readmeShell) run(c readmeCmd) []any {
	t := sh.t
	line, assign, path := c.line, "", ""
	if m := assignJQ.FindStringSubmatch(line); m != nil {
		assign, line, path = m[1], m[2], m[3]
	}
	words := sh.words(c.lineNo, line)
	require.Equal(t, "curl", words[0], "line %d", c.lineNo)
	// One curl is one connection, reused by its --next parts, closed when
	// curl exits.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var answers []any
	var url, body string
	hasBody := false
	flush := func() {
		require.NotEmpty(t, url, "line %d: a curl without a URL", c.lineNo)
		method, rd := "GET", io.Reader(nil)
		if hasBody {
			method, rd = "POST", strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err, "line %d", c.lineNo)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 2, resp.StatusCode/100, "line %d: %s %s answered %d: %s", c.lineNo, method, url, resp.StatusCode, raw)
		var v any
		require.NoError(t, json.Unmarshal(raw, &v), "line %d: %s", c.lineNo, raw)
		answers = append(answers, v)
		url, body, hasBody = "", "", false
	}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-s":
		case w == "-d":
			require.Less(t, i+1, len(words), "line %d: -d without data", c.lineNo)
			i++
			body, hasBody = words[i], true
		case w == "--next":
			flush()
		case strings.HasPrefix(w, "http://"):
			url = w
		default:
			t.Fatalf("line %d: curl argument %q is not one this test knows", c.lineNo, w)
		}
	}
	flush()
	if assign != "" {
		v := jqPath(t, c.lineNo, answers[0], path)
		require.NotEqual(t, "null", v, "line %d: %s found nothing in %v", c.lineNo, path, answers[0])
		sh.vars[assign] = v
	}
	return answers
}

// words splits a command line like sh: '…' literal, "…" and bare words
// with $VAR expanded, adjacent parts joined, an unquoted # a comment.
func (sh *readmeShell) words(lineNo int, line string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	expand := func(i int) int { // line[i] == '$'
		j := i + 1
		for j < len(line) && (line[j] == '_' || line[j] >= 'A' && line[j] <= 'Z' || line[j] >= '0' && line[j] <= '9') {
			j++
		}
		name := line[i+1 : j]
		v, ok := sh.vars[name]
		require.True(sh.t, ok, "line %d: $%s is not set by an earlier line", lineNo, name)
		cur.WriteString(v)
		return j
	}
	for i := 0; i < len(line); {
		switch ch := line[i]; {
		case ch == ' ' || ch == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case ch == '#' && !inWord:
			i = len(line)
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			require.GreaterOrEqual(sh.t, end, 0, "line %d: unclosed '", lineNo)
			cur.WriteString(line[i+1 : i+1+end])
			inWord, i = true, i+end+2
		case ch == '"':
			inWord = true
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '$' {
					i = expand(i)
					continue
				}
				cur.WriteByte(line[i])
				i++
			}
			require.Less(sh.t, i, len(line), "line %d: unclosed \"", lineNo)
			i++
		case ch == '$':
			inWord = true
			i = expand(i)
		default:
			inWord = true
			cur.WriteByte(ch)
			i++
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

var jqStep = regexp.MustCompile(`\.([A-Za-z_]\w*)|\[(\d+)\]`)

// jqPath evaluates a jq path like .messages[0].handle as jq -r prints it.
func jqPath(t *testing.T, lineNo int, v any, path string) string {
	steps := jqStep.FindAllStringSubmatch(path, -1)
	require.NotEmpty(t, steps, "line %d: jq path %q", lineNo, path)
	for _, s := range steps {
		switch x := v.(type) {
		case map[string]any:
			v = x[s[1]]
		case []any:
			n, _ := strconv.Atoi(s[2])
			if s[1] != "" || n >= len(x) {
				return "null"
			}
			v = x[n]
		default:
			return "null"
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var (
	shownPair = regexp.MustCompile(`"(\w+)":("[^"…]*"|-?\d+|true|false|null)?`)
)

// checkShown: every "key" of the shown answer is somewhere in the real
// one, and every "key":scalar shown is there with that value.
func checkShown(t *testing.T, lineNo int, shown string, answer any) {
	t.Helper()
	pairs := map[string][]string{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				b, _ := json.Marshal(x)
				pairs[k] = append(pairs[k], string(b))
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(answer)
	for _, m := range shownPair.FindAllStringSubmatch(shown, -1) {
		got, ok := pairs[m[1]]
		if !assert.True(t, ok, "line %d: the answer has no %q: %v", lineNo, m[1], answer) || m[2] == "" {
			continue
		}
		assert.Contains(t, got, m[2], "line %d: %q", lineNo, m[1])
	}
}

// waitDelivered waits until the scheduler has delivered every delayed
// message that is due (the clock was moved past the longest wait used).
func waitDelivered(t *testing.T, b *Broker) {
	t.Helper()
	require.Eventually(t, func() bool {
		for level, next := range b.sched.Progress() {
			if next < b.store.MaxOffset(schedule.Topic, level-1) && b.levels[level-1] <= 2*time.Second {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the scheduler did not deliver: %v", fmt.Sprint(b.sched.Progress()))
}
