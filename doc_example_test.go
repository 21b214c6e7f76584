package brokercore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Composing by hand, as doc.go shows it: no arrival hook to wire, no
// pointer to the pop service to keep — pop.New subscribes to the store
// itself — and a delayed message delivered by the scheduler wakes a long
// poll. TestDocSnippetIsExampleByHand keeps doc.go's snippet identical to
// the wiring part of this body.
func Example_byHand() {
	dir, err := os.MkdirTemp("", "brokercore-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// doc.go:start
	st, err := store.Open(filepath.Join(dir, "store"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	offs, err := offset.Open(offset.Options{Path: filepath.Join(dir, "offsets"), Bounds: st})
	if err != nil {
		log.Fatal(err)
	}
	defer offs.Close()
	svc := pop.New(st, pop.Options{Offsets: offs}) // *offset.Manager is a pop.Offsets
	defer svc.Close()
	sch, err := schedule.New(st, schedule.Options{ProgressPath: filepath.Join(dir, "schedule", "progress")})
	if err != nil {
		log.Fatal(err)
	}
	if err := sch.Start(); err != nil {
		log.Fatal(err)
	}
	defer sch.Stop()
	// doc.go:end

	later, err := sch.Delay(&store.Message{Topic: "orders", Body: []byte("remind")}, 1) // one second
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Append(later); err != nil {
		log.Fatal(err)
	}
	res, err := svc.Pop(context.Background(), pop.Request{Group: "billing", Topic: "orders", ClientID: "w1",
		Poll: 10 * time.Second}) // woken by the scheduler's delivery
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Messages {
		fmt.Printf("%s: %s\n", d.Message.Topic, d.Message.Body)
		if err := svc.Ack(d.Handle); err != nil {
			log.Fatal(err)
		}
	}
	next, _ := offs.Committed("billing", "orders", 0)
	fmt.Println("committed:", next)
	// Output:
	// orders: remind
	// committed: 1
}

// TestDocSnippetIsExampleByHand fails when the by-hand snippet of doc.go is
// no longer, line for line, the wiring of Example_byHand: the package doc
// shows only code that compiles and runs.
func TestDocSnippetIsExampleByHand(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("doc_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "// is this code, run:\n//\n")
	if !ok {
		t.Fatal("doc.go: no by-hand snippet")
	}
	var snippet []string
	for _, line := range strings.Split(after, "\n") {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		snippet = append(snippet, code)
	}
	_, body, _ := strings.Cut(string(src), "\t// doc.go:start\n")
	body, _, _ = strings.Cut(body, "\t// doc.go:end\n")
	var example []string
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		example = append(example, strings.TrimPrefix(line, "\t"))
	}
	if strings.Join(snippet, "\n") != strings.Join(example, "\n") {
		t.Errorf("doc.go's snippet is not Example_byHand's wiring:\n--- doc.go\n%s\n--- example\n%s",
			strings.Join(snippet, "\n"), strings.Join(example, "\n"))
	}
}
