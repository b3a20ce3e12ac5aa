package test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"
	"github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// TestShape runs agenttest's shape scenarios (the same in
// otelbudgeteino/test's TestShape) with Genkit, and compares the spans'
// canonical dump with the one golden file both frameworks must give: the
// same span tree, names, kinds and attribute keys (Genkit's own spans left
// out). Every gen_ai.* key is in the pinned registry.
func TestShape(t *testing.T) {
	reg, err := agenttest.ReadRegistry("../../genai/testdata/registry-keys.txt")
	require.NoError(t, err)
	var dump string
	for _, sc := range agenttest.ShapeScenarios {
		tp, rec := agenttest.NewRecorder()
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp) // Genkit's own spans, left out of the shape
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prov := &provider{Turns: sc.Turns, Reject: func(n int) (int, http.Header) {
				if n == 1 {
					return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {strconv.Itoa(50)}}
				}
				return 0, nil
			}}
			g := genkit.Init(ctx, genkit.WithPlugins(&compat_oai.OpenAICompatible{
				Provider: "fake", APIKey: "sk-test", BaseURL: fakeURL,
				Opts: []option.RequestOption{
					option.WithHTTPClient(&http.Client{Transport: otelbudgetgenkit.Transport(memTransport{H: prov}, obs)}),
					option.WithMaxRetries(0),
				},
			}))
			tl := &tool{Latency: 30 * time.Millisecond, SlowAt: sc.SlowAt, Slow: 5 * time.Second}
			_, err := otelbudgetgenkit.DefineTool(g, "lookup", "looks a thing up", tl.fn)
			require.NoError(t, err)
			a, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{
				Agent: agenttest.ShapeAgent, Model: "fake/" + agenttest.ShapeModel, Provider: genai.ProviderOpenAI,
				ModelPolicy: agenttest.ShapeModelPolicy(), ToolPolicy: agenttest.ShapeToolPolicy(),
				Reserve: sc.Reserve, Observer: obs,
			})
			require.NoError(t, err)
			res, err := a.Run(deadline.NewContext(ctx, deadline.New(sc.Budget)), g, tenTurns()...)
			require.NoError(t, err)
			require.NotNil(t, res.Answer)
			assert.Equal(t, sc.SlowAt > 0, res.Final)
			res.WaitTools()
		})
		otel.SetTracerProvider(prev)
		spans := rec.Ended()
		assert.Empty(t, reg.UnknownGenAIKeys(spans))
		dump += "# " + sc.Name + "\n" + agenttest.Shape(spans)
	}
	want, err := os.ReadFile("../../agenttest/testdata/shape.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), dump)
}
