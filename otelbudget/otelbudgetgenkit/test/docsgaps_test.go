package test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// genkit.Init starts a goroutine (signal.NotifyContext's) that ends only
// with the context it is given (docs/agents.md): a program, or a test
// checked with goleak or run in a synctest bubble, gives it a context it
// cancels.
func TestGenkitInitWatchesSignals(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	genkit.Init(ctx)
	assert.Error(t, goleak.Find(before), "genkit.Init left a goroutine running")
	cancel()
	assert.NoError(t, goleak.Find(before), "it ends with the context")
}

// compat_oai fills the response's id and model (gen_ai.response.id,
// gen_ai.response.model) only when the provider's answer carries a
// system_fingerprint (docs/agents.md); the chat span carries them then
// only.
func TestResponseIDNeedsFingerprint(t *testing.T) {
	for _, fp := range []bool{true, false} {
		tp, rec := agenttest.NewRecorder()
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prov := &provider{Turns: 0, NoFingerprint: !fp}
			s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, &tool{}, false)
			a := agent(t, 0, func(c *otelbudgetgenkit.Config) { c.Observer = obs })
			_, err := a.Run(deadline.NewContext(ctx, deadline.New(time.Second)), s.g, tenTurns()...)
			require.NoError(t, err)
		})
		var chats int
		for _, sp := range rec.Ended() {
			if sp.Name() != "chat fake-1" || sp.SpanKind().String() != "client" {
				continue
			}
			chats++
			a := attrsOf(sp)
			_, hasID := a["gen_ai.response.id"]
			_, hasModel := a["gen_ai.response.model"]
			assert.Equal(t, fp, hasID, "gen_ai.response.id with system_fingerprint %v", fp)
			assert.Equal(t, fp, hasModel, "gen_ai.response.model with system_fingerprint %v", fp)
		}
		assert.Equal(t, 1, chats)
	}
}

// noGlobalProvider is the child scenario of TestGlobalProviderBeforeInit
// in which TestMain leaves the global tracer provider as it is.
const noGlobalProvider = "no-global-sdk-provider"

// The SDK's tracer provider must be global before genkit.Init for a run to
// be one trace with Genkit's own spans (docs/agents.md): with it, Genkit's
// spans reach the same provider as ours (TestSpans counts them); without
// it (a child process whose TestMain sets none), Genkit installs a
// provider of its own and its spans never reach ours.
func TestGlobalProviderBeforeInit(t *testing.T) {
	out, err := agenttest.RunChild("TestGlobalProviderScenario", noGlobalProvider)
	require.NoError(t, err, out)
	assert.Contains(t, out, "genkit spans in the run's provider: 0; ours: ")
	with := genkitSpansOf(t, true)
	assert.Positive(t, with, "with the SDK's provider global, Genkit's spans join the run's")
}

// TestGlobalProviderScenario is the child's side.
func TestGlobalProviderScenario(t *testing.T) {
	if agenttest.ChildScenario() != noGlobalProvider {
		t.Skip("run by TestGlobalProviderBeforeInit in a child process")
	}
	genkitSpansOf(t, false)
}

// genkitSpansOf runs one two-turn run whose spans go to a recorder (made
// the global provider before genkit.Init when global), and returns how many
// of Genkit's own spans it got.
func genkitSpansOf(t *testing.T, global bool) int {
	tp, rec := agenttest.NewRecorder()
	if global {
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		defer otel.SetTracerProvider(prev)
	}
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 2}
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, &tool{}, false)
		a := agent(t, 0, func(c *otelbudgetgenkit.Config) { c.Observer = obs })
		_, err := a.Run(deadline.NewContext(ctx, deadline.New(time.Second)), s.g, tenTurns()...)
		require.NoError(t, err)
	})
	genkitSpans, ours := 0, 0
	for _, s := range rec.Ended() {
		if s.InstrumentationScope().Name == "genkit-tracer" {
			genkitSpans++
		} else {
			ours++
		}
	}
	fmt.Printf("genkit spans in the run's provider: %d; ours: %d\n", genkitSpans, ours)
	return genkitSpans
}
