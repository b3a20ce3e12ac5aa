package test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

const otelhttpModule = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

// requiredVersion returns the version of module that the go.mod file at
// path requires.
func requiredVersion(t *testing.T, path, module string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "%s requires %s", path, module)
	return string(m[1])
}

// TestOldestModPinsTheRootsMinimum: go.oldest.mod, which
// `go test -modfile=go.oldest.mod ./...` runs these tests with, pins the
// otelhttp the root module requires, the oldest a user can get (go.mod
// tests the newest).
func TestOldestModPinsTheRootsMinimum(t *testing.T) {
	root := requiredVersion(t, "../../go.mod", otelhttpModule)
	require.Equal(t, root, requiredVersion(t, "go.oldest.mod", otelhttpModule), "go.oldest.mod pins the root's minimum")
}
