module github.com/deadlinebudget/budget/otelbudget/budgetopamp

go 1.26.0

replace github.com/deadlinebudget/budget => ../..

require github.com/deadlinebudget/budget v0.1.0

require (
	github.com/google/uuid v1.6.0
	github.com/open-telemetry/opamp-go v0.23.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.47.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/michel-laterman/proxy-connect-dialer-go v0.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
