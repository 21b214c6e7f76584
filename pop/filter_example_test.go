package pop_test

import (
	"fmt"

	"github.com/brokercore/brokercore/pop"
)

// ExampleParseFilter parses subscription expressions the way Apache
// RocketMQ does: "*" inside a list is a literal tag, empty parts are
// dropped, and an expression that names no tag is refused.
func ExampleParseFilter() {
	for _, expr := range []string{"*", " A ||  B ", "A || *", "A ||", "||"} {
		f, err := pop.ParseFilter(expr)
		if err != nil {
			fmt.Printf("%q: error\n", expr)
			continue
		}
		fmt.Printf("%q: all=%v tags=%q matches B: %v\n", expr, f.All(), f.Tags(), f.Match("B"))
	}
	// Output:
	// "*": all=true tags=[] matches B: true
	// " A ||  B ": all=false tags=["A" "B"] matches B: true
	// "A || *": all=false tags=["*" "A"] matches B: false
	// "A ||": all=false tags=["A"] matches B: false
	// "||": error
}

// ExampleRequest_tagFilter hands pop an expression a client sent in any
// spelling Apache accepts: parse it once, refuse it if it does not parse
// (ILLEGAL_FILTER_EXPRESSION on the wire), and set Request.TagFilter.
func ExampleRequest_tagFilter() {
	f, err := pop.ParseFilter("TagA || TagB ||")
	if err != nil {
		fmt.Println("refuse:", err)
		return
	}
	req := pop.Request{Group: "g", Topic: "orders", ClientID: "c1", TagFilter: &f}
	fmt.Println(req.TagFilter)
	// Output: TagA || TagB
}
