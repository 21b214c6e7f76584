package brokercore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// The README's Go snippets, as runnable examples. Each README snippet is a
// whole program; its main's body is the body of the Example of the same
// name here (TestREADMESnippetsAreExamples keeps them the same).

// Example_open is the README's "Use it in your program".
func Example_open() {
	dir, err := os.MkdirTemp("", "brokercore-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	b, err := brokercore.Open(dir, brokercore.Options{}) // SyncGroup: Append returns after fsync
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := b.Store().Append(&store.Message{Topic: "orders", Keys: []string{"order-1"}, Body: []byte("paid")}); err != nil {
		log.Fatal(err)
	}
	// Delayed by level 1 (one second): the scheduler appends it to "orders" when it is due.
	later, err := b.Scheduler().Delay(&store.Message{Topic: "orders", Body: []byte("remind")}, 1)
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Store().Append(later); err != nil {
		log.Fatal(err)
	}

	for range 2 {
		res, err := b.Pop().Pop(context.Background(), pop.Request{Group: "billing", Topic: "orders", ClientID: "worker-1",
			Max: 16, Invisible: 30 * time.Second, Poll: 5 * time.Second}) // Poll: wait for an arrival
		if err != nil {
			log.Fatal(err)
		}
		for _, d := range res.Messages {
			fmt.Printf("%s/%d@%d: %s\n", d.Message.Topic, d.Message.QueueID, d.Message.QueueOffset, d.Message.Body)
			if err := b.Pop().Ack(d.Handle); err != nil { // unacked messages come back after Invisible
				log.Fatal(err)
			}
		}
	}
	committed, _ := b.Offsets().Committed("billing", "orders", 0) // the acks committed it
	fmt.Println("committed offset:", committed)
	// Output:
	// orders/0@0: paid
	// orders/0@1: remind
	// committed offset: 2
}

// Example_compose is the README's second snippet: two pieces by hand.
func Example_compose() {
	dir, err := os.MkdirTemp("", "brokercore-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := store.Open(dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	svc := pop.New(st, pop.Options{}) // nil Offsets: in memory; pass an *offset.Manager to persist
	defer svc.Close()                 // before the store: deferred calls run last-first

	if err := st.Append(&store.Message{Topic: "orders", Body: []byte("paid")}); err != nil {
		log.Fatal(err)
	}
	res, err := svc.Pop(context.Background(), pop.Request{Group: "billing", Topic: "orders", ClientID: "worker-1",
		QueueID: pop.AllQueues}) // zero Max: one message; zero Invisible: pop.DefaultInvisible
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Messages {
		fmt.Printf("%s: %s (attempt %d)\n", d.Message.Topic, d.Message.Body, d.Attempts)
		if err := svc.Ack(d.Handle); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// orders: paid (attempt 1)
}

// readmeExamples names, in order, the Example whose body each ```go block
// of README.md is.
var readmeExamples = []string{"Example_open", "Example_compose"}

// TestREADMESnippetsAreExamples fails when a Go snippet of the README is no
// longer, line for line, the body of its Example here: the README shows
// only code that compiles and whose output go test checks.
func TestREADMESnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) != len(readmeExamples) {
		t.Fatalf("README.md has %d Go snippets, readmeExamples names %d", len(blocks), len(readmeExamples))
	}
	for i, name := range readmeExamples {
		snippet := funcBody(t, blocks[i][1], "func main() {")
		example := funcBody(t, string(src), "func "+name+"() {")
		example, _, _ = strings.Cut(example, "\t// Output:")
		if strings.TrimSpace(snippet) != strings.TrimSpace(example) {
			t.Errorf("README.md snippet %d is not the body of %s:\n--- README\n%s\n--- %s\n%s", i+1, name, snippet, name, example)
		}
	}
}

// funcBody returns the lines between the line opening a function and its
// closing "}" at the start of a line.
func funcBody(t *testing.T, src, opening string) string {
	t.Helper()
	_, rest, ok := strings.Cut(src, opening+"\n")
	if !ok {
		t.Fatalf("no %q", opening)
	}
	body, _, ok := strings.Cut(rest, "\n}\n")
	if !ok {
		t.Fatalf("%q is not closed", opening)
	}
	return body
}
