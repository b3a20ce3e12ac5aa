package opampextension

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// startClient starts a budgetopamp client of checkout against the
// extension at addr over wss, with header; the test's cleanup stops it.
func startClient(t *testing.T, addr string, tlsc budgetopamp.Option, header http.Header) (*budgetopamp.Client, *learn.Live) {
	t.Helper()
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 2 * time.Second}})
	require.NoError(t, err)
	c, err := budgetopamp.Start(context.Background(), "wss://"+addr+DefaultPath, live,
		budgetopamp.WithServiceName("checkout"), tlsc, budgetopamp.WithHeader(header))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
	return c, live
}

// End to end, budgetopamp's client against the extension with TLS and
// bearer auth: the client with the token gets its ceilings; an anonymous
// one and one with a wrong token are refused at the handshake and apply
// nothing; a pushed 1 ns ceiling is answered FAILED by the client, counted,
// and nothing is applied.
func TestClientOverTLSWithBearerAuth(t *testing.T) {
	cfg, h, certs := secured(t, "s3cret")
	x := start(t, cfg, h)
	addr := x.Addr().String()
	x.PublishCeilings(agenttest.Ceilings("checkout", 120))

	good, live := startClient(t, addr, budgetopamp.WithTLS(certs.ClientTLS(t)), http.Header{"Authorization": {"Bearer s3cret"}})
	anonymous, _ := startClient(t, addr, budgetopamp.WithTLS(certs.ClientTLS(t)), nil)
	wrong, _ := startClient(t, addr, budgetopamp.WithTLS(certs.ClientTLS(t)), http.Header{"Authorization": {"Bearer guess"}})

	require.Eventually(t, func() bool { return good.Status().Applied == 1 }, 10*time.Second, time.Millisecond)
	lc, ok := live.Ceiling("fetch")
	require.True(t, ok)
	assert.Equal(t, 120*time.Millisecond, lc.Ceiling)
	for name, c := range map[string]*budgetopamp.Client{"anonymous": anonymous, "wrong token": wrong} {
		require.Eventually(t, func() bool { return c.Status().ConnectError != nil }, 10*time.Second, time.Millisecond, name)
		s := c.Status()
		assert.False(t, s.Connected, name)
		assert.ErrorContains(t, s.ConnectError, "bad handshake", name) // a 401, TestTLSAndBearerAuth
		assert.Zero(t, s.Applied, name)
	}

	// A rogue 1 ns ceiling: the extension serves it (it is > 0), the
	// client refuses it below its 1 ms floor and says so.
	x.PublishCeilings(agenttest.Ceilings("checkout", 1e-6))
	require.Eventually(t, func() bool { return good.Status().Refused == 1 }, 10*time.Second, time.Millisecond)
	lc, _ = live.Ceiling("fetch")
	assert.Equal(t, 120*time.Millisecond, lc.Ceiling, "nothing applied")
	assert.ErrorIs(t, good.Status().LastRefusal, budgetopamp.ErrInvalidBody)
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		for _, a := range x.agents {
			if a.status == protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the extension hears FAILED")
	x.mu.Lock()
	assert.Len(t, x.agents, 1, "only the authenticated client is an agent")
	x.mu.Unlock()
}
