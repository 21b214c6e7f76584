package grpcapi

import (
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/pop"
)

// setFilter puts a TAG expression on the pop, parsed with the library's one
// grammar (pop.ParseFilter, Apache's: "" or "*" = every message, "A || B" =
// tag A or B, "A || *" = tag A or the tag "*"). An expression it refuses is
// answered ILLEGAL_FILTER_EXPRESSION here, before anything runs.
func setFilter(req *pop.Request, expr string) *v2.Status {
	f, err := pop.ParseFilter(expr)
	if err != nil {
		return status(v2.Code_ILLEGAL_FILTER_EXPRESSION, "illegal tag expression %q: %v", expr, err)
	}
	req.Filter, req.TagFilter = "", &f
	return nil
}
