package grpcapi

import (
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/pop"
)

// setFilter puts a TAG expression on the pop ("" or "*" = every message,
// "A || B" = tag A or B).
func setFilter(req *pop.Request, expr string) *v2.Status {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil
	}
	return status(v2.Code_UNSUPPORTED, "tag filters are not supported yet by this broker's pop service")
}
