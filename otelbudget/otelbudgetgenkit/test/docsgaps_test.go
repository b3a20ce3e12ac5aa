package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
