package brokercore_test

import (
	"io"
	"log/slog"

	"github.com/brokercore/brokercore/consumer"
)

func consumerClient() consumer.Client {
	return consumer.Client{ChannelID: "ch1", ClientID: "c1", Language: "GO", Version: 1}
}

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
