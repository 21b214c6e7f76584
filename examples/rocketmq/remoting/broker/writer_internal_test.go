package broker

import (
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

func TestCheckScheduledRefusesDelayInABatch(t *testing.T) {
	plain := &store.Message{Topic: "t"}
	delayed := &store.Message{Topic: "t", Properties: map[string]string{"DELAY": "2"}}
	timed := &store.Message{Topic: "t", Properties: map[string]string{PropTimerDelayMS: "10"}}
	require.NoError(t, checkScheduled([]*store.Message{plain, plain}))
	require.NoError(t, checkScheduled([]*store.Message{delayed}))
	require.Error(t, checkScheduled([]*store.Message{plain, delayed}))
	require.Error(t, checkScheduled([]*store.Message{timed, plain}))
	require.Error(t, checkScheduled([]*store.Message{{Topic: "t", Properties: map[string]string{"DELAY": "soon"}}}))
}
