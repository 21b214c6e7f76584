package meta

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGroupsPersistAcrossReopenAndOrderlyIsHonoured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	g, err := OpenGroups(path)
	require.NoError(t, err)
	c, err := ParseGroup([]byte(`{"groupName":"billing","consumeMessageOrderly":true,"retryMaxTimes":3}`))
	require.NoError(t, err)
	require.True(t, c.ConsumeEnable, "missing fields take Apache's defaults")
	require.Equal(t, 1, c.RetryQueueNums)
	require.NoError(t, g.Put(c))
	require.True(t, g.Orderly("billing"))
	require.False(t, g.Orderly("other"))

	g2, err := OpenGroups(path)
	require.NoError(t, err)
	got, ok := g2.Get("billing")
	require.True(t, ok)
	require.Equal(t, c, got)
	var w struct {
		SubscriptionGroupTable map[string]map[string]any
		DataVersion            struct{ Counter int64 }
	}
	require.NoError(t, json.Unmarshal(g2.WrapperJSON(), &w))
	require.Equal(t, true, w.SubscriptionGroupTable["billing"]["consumeMessageOrderly"])
	require.EqualValues(t, 1, w.DataVersion.Counter)

	had, err := g2.Delete("billing")
	require.NoError(t, err)
	require.True(t, had)
	g3, err := OpenGroups(path)
	require.NoError(t, err)
	require.Empty(t, g3.All())
}

func TestBadGroupsAreRefusedAndChangeNothing(t *testing.T) {
	g, err := OpenGroups("")
	require.NoError(t, err)
	for _, body := range []string{``, `[]`, `{"groupName":""}`, `{"groupName":"a b"}`, `{"groupName":"g","retryMaxTimes":-2}`, `{"groupName":"g","retryQueueNums":-1}`} {
		_, err := ParseGroup([]byte(body))
		require.ErrorIs(t, err, ErrInvalid, body)
	}
	require.ErrorIs(t, g.Put(Group{GroupName: "a b"}), ErrInvalid)
	require.Empty(t, g.All())
}

// FuzzParseGroup: any body is a valid group or ErrInvalid; never a panic.
func FuzzParseGroup(f *testing.F) {
	for _, s := range []string{`{"groupName":"g"}`, `{"groupName":"g","consumeMessageOrderly":true,"groupRetryPolicy":{"type":"EXPONENTIAL"}}`, `{`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseGroup(body)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		require.NoError(t, c.check())
	})
}
