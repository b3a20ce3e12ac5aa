package test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

var updateShape = flag.Bool("update-shape", false, "write agenttest/testdata/shape.golden from this run")

const shapeGolden = "../../agenttest/testdata/shape.golden"

// TestShape runs agenttest's shape scenarios (the same in
// otelbudgetgenkit/test's TestShape) with the ADK ChatModelAgent and the
// react agent, and
// compares the spans' canonical dump with the one golden file both
// frameworks must give: the same span tree, names, kinds and attribute
// keys. Every gen_ai.* key is in the pinned registry.
func TestShape(t *testing.T) {
	reg, err := agenttest.ReadRegistry("../../genai/testdata/registry-keys.txt")
	require.NoError(t, err)
	for _, kind := range []string{"adk", "react"} {
		t.Run(kind, func(t *testing.T) { testShape(t, reg, kind) })
	}
}

func testShape(t *testing.T, reg agenttest.Registry, kind string) {
	var dump string
	for _, sc := range agenttest.ShapeScenarios {
		tp, rec := agenttest.NewRecorder()
		synctest.Test(t, func(t *testing.T) {
			p := &provider{Turns: sc.Turns, Model: agenttest.ShapeModel, Reject: func(n int) (int, http.Header) {
				if n == 1 {
					return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"50"}}
				}
				return 0, nil
			}}
			lk := &lookup{name: "lookup", latencyFor: func(n int) time.Duration {
				if n == sc.SlowAt {
					return 5 * time.Second
				}
				return 30 * time.Millisecond
			}, ignoreCtx: func(n int) bool { return n == sc.SlowAt }}
			b, err := otelbudgeteino.New(otelbudgeteino.Config{
				Agent: agenttest.ShapeAgent, Provider: genai.ProviderOpenAI, ModelName: agenttest.ShapeModel,
				Model: agenttest.ShapeModelPolicy(), Tool: agenttest.ShapeToolPolicy(), Reserve: sc.Reserve,
				Tools:    map[string]otelbudgeteino.ToolPolicy{"lookup": {Policy: agenttest.ShapeToolPolicy()}},
				Observer: otelbudget.New(otelbudget.WithTracerProvider(tp)),
			})
			require.NoError(t, err)
			var res *otelbudgeteino.Result
			if kind == "adk" {
				a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
				res, err = b.Run(context.Background(), deadline.New(sc.Budget), a.agent, []*schema.Message{schema.UserMessage("find it")})
			} else {
				ctx, run, serr := b.Start(context.Background(), deadline.New(sc.Budget), agenttest.ShapeAgent)
				require.NoError(t, serr)
				msg, gerr := newReact(t, b, p, lk).Generate(ctx, []*schema.Message{schema.UserMessage("find it")})
				res, err = run.End(msg, gerr)
			}
			require.NoError(t, err)
			require.NotNil(t, res.Answer)
			assert.Equal(t, sc.SlowAt > 0, res.Final)
			res.WaitTools()
			time.Sleep(time.Second) // Eino unwinds
		})
		spans := rec.Ended()
		assert.Empty(t, reg.UnknownGenAIKeys(spans))
		dump += "# " + sc.Name + "\n" + agenttest.Shape(spans)
	}
	if *updateShape && kind == "adk" {
		require.NoError(t, os.WriteFile(shapeGolden, []byte(dump), 0o644))
	}
	want, err := os.ReadFile(shapeGolden)
	require.NoError(t, err)
	assert.Equal(t, string(want), dump)
}
