module github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo

go 1.26.0

replace (
	github.com/deadlinebudget/budget => ../..
	github.com/deadlinebudget/budget/deadline/deadlinemcpgo => ../../deadline/deadlinemcpgo
)

require (
	github.com/deadlinebudget/budget v0.1.0
	github.com/deadlinebudget/budget/deadline/deadlinemcpgo v0.1.0
	github.com/mark3labs/mcp-go v1.6.0
	go.opentelemetry.io/otel/trace v1.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/jsonschema-go v0.4.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
