package broker_test

import (
	"strconv"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/stretchr/testify/require"
)

func sendTagged(topic, tag, body string) *wire.Command {
	r := sendReq(topic, 0, body)
	r.ExtFields["properties"] = "UNIQ_KEY\x01" + body + "\x02TAGS\x01" + tag + "\x02"
	return r
}

func pullExpr(topic, expr string) *wire.Command {
	r := pullReq(topic, "0", "0")
	r.ExtFields["sysFlag"] = strconv.Itoa(4) // subscription in the request, no suspend
	r.ExtFields["subscription"] = expr
	return r
}

// TestPullTagFilterIsApachesGrammar: the remoting pull filters with
// pop.ParseFilter, Apache's grammar: "A || *" is the tags {A, *} (the
// whole expression "*" alone means everything), and an expression naming
// no tag is SUBSCRIPTION_PARSE_FAILED.
func TestPullTagFilterIsApachesGrammar(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	for _, tb := range [][2]string{{"A", "a-body"}, {"B", "b-body"}, {"*", "star-body"}} {
		require.Equal(t, wire.Success, rc.call(sendTagged("tf", tb[0], tb[1])).Code)
	}
	resp := rc.call(pullExpr("tf", "A || *"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), "a-body")
	require.Contains(t, string(resp.Body), "star-body")
	require.NotContains(t, string(resp.Body), "b-body", `"A || *" is {A, *}, not every tag`)

	resp = rc.call(pullExpr("tf", " * "))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.NotContains(t, string(resp.Body), "a-body", `" * " is the tag "*"`)

	for _, expr := range []string{"||", "|| ||"} {
		resp = rc.call(pullExpr("tf", expr))
		require.Equal(t, wire.SubscriptionParseFailed, resp.Code, expr)
	}
	resp = rc.call(pullExpr("tf", "*"))
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), "b-body")
}
