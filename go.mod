module github.com/brokercore/brokercore

go 1.26

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/wal v1.2.1
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
