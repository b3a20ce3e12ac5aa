package main

import (
	"reflect"
	"testing"
)

func TestExtract(t *testing.T) {
	src := "Run `cd examples/tracedemo && go run . -runs 2000` or `go test -bench`; `make demo | jq`.\n" +
		"```sh\n" +
		"cd otelbudget/test\n" +
		"go test -race ./...   # newest\n" +
		"OTEL_A=1 \\\n" +
		"  make demo\n" +
		"```\n" +
		"```go\n" +
		"go func() {}()\n" +
		"```\n" +
		"    cd bench/grpcbench\n" +
		"    go test -c -o /tmp/x.test .\n" +
		"From the root, `go run ./x` does not build it. <!-- doccheck:skip -->\n" +
		"text\n" +
		"    go vet ./...\n"
	var got []string
	for _, c := range extract("x.md", src) {
		got = append(got, c.dir+" $ "+c.text)
	}
	want := []string{
		". $ cd examples/tracedemo && go run . -runs 2000",
		". $ go test -bench",
		". $ make demo | jq",
		". $ cd otelbudget/test",
		"otelbudget/test $ go test -race ./...",
		"otelbudget/test $ OTEL_A=1 make demo",
		". $ cd bench/grpcbench",
		"bench/grpcbench $ go test -c -o /tmp/x.test .",
		". $ go vet ./...",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extract:\n got %q\nwant %q", got, want)
	}
}

func TestSplitCommands(t *testing.T) {
	for in, want := range map[string][]string{
		"cd a && go run . -x 1":         {"cd a", "go run . -x 1"},
		"make demo | jq":                {"make demo", "jq"},
		"go test -run '^(A|B)$' ./x; b": {"go test -run '^(A|B)$' ./x", "b"},
		"go run . -scenario tight|slow": {"go run . -scenario tight|slow"},
	} {
		if got := splitCommands(in); !reflect.DeepEqual(got, want) {
			t.Errorf("splitCommands(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSynopsis(t *testing.T) {
	for in, want := range map[string]bool{
		"go run . -runs 2000":                  false,
		"go run . -scenario tight|slow":        true,
		"go run . [-parallel 32]":              true,
		"go run . -transport grpc -scenario …": true,
		"make demo | jq":                       false,
	} {
		if got := synopsis(in); got != want {
			t.Errorf("synopsis(%q) = %v, want %v", in, got, want)
		}
	}
}
