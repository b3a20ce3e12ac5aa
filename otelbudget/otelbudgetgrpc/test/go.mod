module github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc/test

go 1.26.0

replace (
	github.com/deadlinebudget/budget => ../../..
	github.com/deadlinebudget/budget/deadline/deadlinegrpc => ../../../deadline/deadlinegrpc
	github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc => ..
)

require (
	github.com/deadlinebudget/budget v0.1.0
	github.com/deadlinebudget/budget/deadline/deadlinegrpc v0.1.0
	github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc v0.1.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.72.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect

require (
	cloud.google.com/go/compute/metadata v0.9.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/deadlinebudget/budget/deadline/deadlinegrpc/interoptest v0.1.0
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
)

replace github.com/deadlinebudget/budget/deadline/deadlinegrpc/interoptest => ../../../deadline/deadlinegrpc/interoptest
