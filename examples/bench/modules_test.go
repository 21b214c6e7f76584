package main

import (
	"io"
	"maps"
	"strings"
	"testing"
)

func TestParseBenchLineReadsEveryMetric(t *testing.T) {
	m, ok := parseBenchLine("BenchmarkProduceGroups/single/SyncGroup/producers=64-2   \t  120000\t     16600 ns/op\t  60241 msgs/s\t  28.5 cpu-µs/msg\t 1.71 cores")
	want := metrics{"ns/op": 16600, "msgs/s": 60241, "cpu-µs/msg": 28.5, "cores": 1.71}
	if !ok || !maps.Equal(m, want) {
		t.Fatalf("got %v %v, want %v", m, ok, want)
	}
	for _, bad := range []string{"", "PASS", "ok  	x	1.2s", "BenchmarkX-2 notanumber 1 ns/op", "BenchmarkX-2 10 1", "BenchmarkX-2 10 x ns/op", "--- BENCH: BenchmarkX-2"} {
		if m, ok := parseBenchLine(bad); ok {
			t.Errorf("%q parsed as %v", bad, m)
		}
	}
}

func TestModulesSectionIsReplacedInPlaceOrAppended(t *testing.T) {
	sec := []byte(modulesBegin + "\nnew\n" + modulesEnd + "\n")
	if got, want := string(replaceModulesSection([]byte("# B\n\ntext\n"), sec)), "# B\n\ntext\n\n"+string(sec); got != want {
		t.Errorf("appended: got %q, want %q", got, want)
	}
	doc := []byte("# B\n\n" + modulesBegin + "\nold\n" + modulesEnd + "\n\n## after\n")
	got := replaceModulesSection(doc, sec)
	if want := "# B\n\n" + modulesBegin + "\nnew\n" + modulesEnd + "\n\n## after\n"; string(got) != want {
		t.Errorf("replaced: got %q, want %q", got, want)
	}
	if s := string(modulesSection(got)); s != modulesBegin+"\nnew\n"+modulesEnd {
		t.Errorf("section %q", s)
	}
	if s := modulesSection([]byte("# B\n")); s != nil {
		t.Errorf("no markers: %q", s)
	}
	if s := modulesSection([]byte(modulesEnd + "\n" + modulesBegin)); s != nil {
		t.Errorf("markers out of order are no section: %q", s)
	}
}

func TestPerRoundRatioIsTheMedianOfEachRoundsOwnRatio(t *testing.T) {
	a := []metrics{{"x": 2}, {"x": 9}, {"x": 3}}
	b := []metrics{{"x": 1}, {"x": 3}, {"x": 3}}
	if r := perRound(a, b, "x"); r != 2 { // ratios 2, 3, 1
		t.Errorf("per-round %v, want 2", r)
	}
	if s, ok := statOf(a, "x"); !ok || s != (stat{3, 2, 9}) {
		t.Errorf("stat %v %v", s, ok)
	}
	if _, ok := statOf(a, "y"); ok {
		t.Error("a metric no round has")
	}
}

func TestModulesRefusesBadFlagsBeforeBuildingAnything(t *testing.T) {
	for _, args := range [][]string{{"-only", "cluter"}, {"-rounds", "0"}} {
		if err := modulesCmd(t.Context(), args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestModulesOnlyKeepsTheOtherSetsTables: rerunning one set (-only acl)
// replaces that set's block and keeps the other's, with its date line.
func TestModulesOnlyKeepsTheOtherSetsTables(t *testing.T) {
	clBegin, clEnd := setMarkers("cluster")
	aclBegin, aclEnd := setMarkers("acl")
	cluster := clBegin + "\n### Replication: produce\n\n| a |\n\n- date: earlier\n" + clEnd
	old := composeModulesSection(nil, map[string][]byte{"cluster": []byte(cluster),
		"acl": []byte(aclBegin + "\n### Access control: cost\n\n| old acl |\n\n- date: earlier\n" + aclEnd)})
	newACL := []byte(aclBegin + "\n### Access control: cost\n\n| new acl |\n\n- date: today\n" + aclEnd)
	got := string(composeModulesSection(old, map[string][]byte{"acl": newACL}))
	if !strings.Contains(got, cluster) {
		t.Errorf("cluster block not kept:\n%s", got)
	}
	if strings.Contains(got, "old acl") || !strings.Contains(got, string(newACL)) {
		t.Errorf("acl block not replaced:\n%s", got)
	}
	if strings.Index(got, clBegin) > strings.Index(got, aclBegin) {
		t.Errorf("sets out of order:\n%s", got)
	}
	if s := modulesSection([]byte(got)); s == nil {
		t.Errorf("no section in:\n%s", got)
	}
	if b := oldSetBlock([]byte(aclEnd+aclBegin), "acl"); b != nil {
		t.Errorf("markers out of order are no block: %q", b)
	}
}
