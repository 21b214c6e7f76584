package pop

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseFilterFollowsApacheBuildSubscriptionData pins ParseFilter to
// Apache RocketMQ's FilterAPI.buildSubscriptionData (split at "||", trim,
// drop empty parts; only the whole "" or "*" is everything) and to its
// matching (the tag set contains the message's tags; FilterUtils).
func TestParseFilterFollowsApacheBuildSubscriptionData(t *testing.T) {
	for _, c := range []struct {
		expr string
		tags []string // nil: every message
	}{
		{"", nil},
		{"*", nil},
		{"A", []string{"A"}},
		{" A ||  B ", []string{"A", "B"}},
		{"B||A||B", []string{"A", "B"}},
		{"A ||", []string{"A"}},
		{"|| A", []string{"A"}},
		{"A |||| B", []string{"A", "B"}},
		{"A || || B", []string{"A", "B"}},
		{"A || *", []string{"*", "A"}}, // "*" in a list is a literal tag
		{" * ", []string{"*"}},         // only the exact "*" is SUB_ALL
		{"A | B", []string{"A | B"}},   // a single '|' is part of a tag
		{"|", []string{"|"}},
		{"A B", []string{"A B"}},
		{"\tA\x00||\x1fB\n", []string{"A", "B"}}, // Java's trim: every byte <= ' '
		{"\u00a0A", []string{"\u00a0A"}},         // and nothing else (Go's TrimSpace would)
	} {
		f, err := ParseFilter(c.expr)
		require.NoError(t, err, "%q", c.expr)
		require.Equal(t, c.tags, f.Tags(), "%q", c.expr)
		require.Equal(t, c.tags == nil, f.All(), "%q", c.expr)
	}
	for _, expr := range []string{"||", "||||", " ", "|| ||", "\t", strings.Repeat("A", MaxFilterLen+1)} {
		_, err := ParseFilter(expr)
		require.ErrorIs(t, err, ErrInvalid, "%q", expr)
	}

	star, _ := ParseFilter("A || *")
	require.True(t, star.Match("A"))
	require.True(t, star.Match("*"))
	require.False(t, star.Match("B"), `"A || *" is not every message`)
	require.False(t, star.Match(""), "a message without tags matches no tag list")
	all, _ := ParseFilter("")
	require.True(t, all.Match(""))
}

// TestRequestTagFilterTakesAnyApacheSpelling: a front-end hands pop a
// parsed Filter; Filter and TagFilter together are refused.
func TestRequestTagFilterTakesAnyApacheSpelling(t *testing.T) {
	src := newMemSource()
	src.appendTags("T", 0, "A", "*", "B")
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	f, err := ParseFilter("A || * ||")
	require.NoError(t, err)
	req := filterReq("", 32)
	req.TagFilter = &f
	r, err := s.Pop(bg, req)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(r))

	req.Filter = "A"
	_, err = s.Pop(bg, req)
	require.ErrorIs(t, err, ErrInvalid)
}

// FuzzParseFilter: ParseFilter never panics; what it accepts is in normal
// form (String parses back to the same tags), every tag is trimmed, non
// empty and free of "||", and PlainFilter accepts a subset with the same
// meaning.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "*", "A", "A||B", " A ||  B ", "A || *", "||", "|", "A |||| B", " * ", "\x00", "A\u00a0||B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		pf, err := ParseFilter(expr)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			_, perr := PlainFilter(expr)
			require.Error(t, perr, "PlainFilter accepts only what ParseFilter does")
			return
		}
		for _, tag := range pf.Tags() {
			require.NotEmpty(t, tag)
			require.Equal(t, javaTrim(tag), tag)
			require.NotContains(t, tag, "||")
			require.True(t, pf.Match(tag))
		}
		again, err := ParseFilter(pf.String())
		require.NoError(t, err, "normal form %q of %q", pf.String(), expr)
		require.Equal(t, pf.Tags(), again.Tags())
		if plain, err := PlainFilter(expr); err == nil {
			require.Equal(t, pf.Tags(), plain.Tags())
		}
	})
}
