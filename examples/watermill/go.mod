module github.com/brokercore/brokercore/examples/watermill

go 1.26

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/brokercore/brokercore v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.11.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/brokercore/brokercore => ../..
