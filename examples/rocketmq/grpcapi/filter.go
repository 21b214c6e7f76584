package grpcapi

import (
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/pop"
)

// setFilter puts a TAG expression on the pop ("" or "*" = every message,
// "A || B" = tag A or B; pop.Request.Filter). An expression pop would
// refuse is answered ILLEGAL_FILTER_EXPRESSION here, before anything runs.
func setFilter(req *pop.Request, expr string) *v2.Status {
	e := strings.TrimSpace(expr)
	if e != "" && e != "*" {
		for _, p := range strings.Split(e, "||") {
			p = strings.TrimSpace(p)
			if p == "" || strings.ContainsAny(p, " \t\r\n|*") {
				return status(v2.Code_ILLEGAL_FILTER_EXPRESSION, "illegal tag expression %q (use \"*\" or \"A || B\")", expr)
			}
		}
	}
	req.Filter = e
	return nil
}
