package budgetconnector

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opamp-go/client"
	"github.com/open-telemetry/opamp-go/client/types"
	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// agent is an OpAMP client of the test, over WebSocket or plain HTTP,
// that applies the ceilings it is sent and reports it.
type agent struct {
	c    client.OpAMPClient
	mu   sync.Mutex
	ce   []budgetopamp.Ceilings
	last []byte // the hash last applied
}

func (a *agent) got() []budgetopamp.Ceilings {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]budgetopamp.Ceilings(nil), a.ce...)
}

func startAgent(t *testing.T, url, service string, ws bool) *agent {
	t.Helper()
	a := &agent{}
	if ws {
		a.c = client.NewWebSocket(nil)
	} else {
		a.c = client.NewHTTP(nil)
	}
	require.NoError(t, a.c.SetAgentDescription(&protobufs.AgentDescription{IdentifyingAttributes: []*protobufs.KeyValue{
		{Key: "service.name", Value: &protobufs.AnyValue{Value: &protobufs.AnyValue_StringValue{StringValue: service}}},
	}}))
	var uid types.InstanceUid
	_, err := rand.Read(uid[:])
	require.NoError(t, err)
	heartbeat := 50 * time.Millisecond
	scheme := "ws"
	if !ws {
		scheme = "http"
	}
	require.NoError(t, a.c.Start(context.Background(), types.StartSettings{
		OpAMPServerURL:    scheme + "://" + url + DefaultOpAMPPath,
		InstanceUid:       uid,
		HeartbeatInterval: &heartbeat,
		Capabilities: protobufs.AgentCapabilities_AgentCapabilities_AcceptsRemoteConfig |
			protobufs.AgentCapabilities_AgentCapabilities_ReportsRemoteConfig | protobufs.AgentCapabilities_AgentCapabilities_ReportsStatus |
			protobufs.AgentCapabilities_AgentCapabilities_ReportsHeartbeat,
		Callbacks: types.Callbacks{OnMessage: func(ctx context.Context, msg *types.MessageData) {
			if msg.RemoteConfig == nil {
				return
			}
			a.mu.Lock()
			again := bytes.Equal(a.last, msg.RemoteConfig.ConfigHash)
			a.last = msg.RemoteConfig.ConfigHash
			a.mu.Unlock()
			if again {
				// A plain-HTTP poll may bring it again before the status
				// said it was applied: a real client applies it once.
				return
			}
			f := msg.RemoteConfig.GetConfig().GetConfigMap()[budgetopamp.ConfigKey]
			c, err := budgetopamp.ParseCeilings(f.GetBody())
			st := &protobufs.RemoteConfigStatus{LastRemoteConfigHash: msg.RemoteConfig.ConfigHash, Status: protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED}
			if err != nil {
				st.Status, st.ErrorMessage = protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED, err.Error()
			} else {
				a.mu.Lock()
				a.ce = append(a.ce, c)
				a.mu.Unlock()
			}
			_ = a.c.SetRemoteConfigStatus(st)
		}},
	}))
	t.Cleanup(func() { require.NoError(t, a.c.Stop(context.Background())) })
	return a
}

func ceilingsFor(service string, ms float64) budgetopamp.Ceilings {
	return budgetopamp.Ceilings{Service: service, ComputedAt: time.Now(),
		Steps: map[string]budgetopamp.StepCeiling{"fetch": {CeilingMS: ms, EstimateMS: ms / 1.2, Quantile: 0.99, Margin: 1.2, Samples: 1000}}}
}

// The extension serves each agent its service's ceilings: at once to one
// that connects after they were published, pushed over WebSocket when they
// change, at the next poll over plain HTTP; another service's agent gets
// none of them; an unchanged set is not sent again.
func TestOpAMPServesCeilings(t *testing.T) {
	f := NewExtensionFactory()
	cfg := f.CreateDefaultConfig().(*ExtensionConfig)
	cfg.Endpoint = "127.0.0.1:0"
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	x := ext.(*opampExtension)
	addr := x.Addr().String()

	x.PublishCeilings(ceilingsFor("checkout", 120))
	early := startAgent(t, addr, "checkout", true)
	polling := startAgent(t, addr, "checkout", false)
	other := startAgent(t, addr, "search", true)
	for _, a := range []*agent{early, polling} {
		require.Eventually(t, func() bool { return len(a.got()) == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, 120.0, a.got()[0].Steps["fetch"].CeilingMS)
		assert.Equal(t, "checkout", a.got()[0].Service)
	}

	// The same ceilings computed again are not a change.
	x.PublishCeilings(ceilingsFor("checkout", 120))
	x.PublishCeilings(ceilingsFor("checkout", 150))
	for _, a := range []*agent{early, polling} {
		require.Eventually(t, func() bool { return len(a.got()) == 2 }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, 150.0, a.got()[1].Steps["fetch"].CeilingMS)
	}
	// The agents reported them applied.
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		n := 0
		for _, s := range x.agents {
			if s.service == "checkout" && s.status == protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED {
				n++
			}
		}
		return n == 2
	}, 10*time.Second, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // heartbeats come and go: nothing more is sent
	assert.Len(t, early.got(), 2)
	assert.Len(t, polling.got(), 2)
	assert.Empty(t, other.got(), "search has no ceilings yet")

	// An invalid set is not served: it is refused before it is kept, so
	// no agent can be sent it.
	x.PublishCeilings(ceilingsFor("search", -1))
	x.mu.Lock()
	_, kept := x.services["search"]
	x.mu.Unlock()
	assert.False(t, kept, "an invalid set is not kept for serving")
	assert.Empty(t, other.got())
}

// The connector publishes each service's ceilings to the extension it
// names, at every export.
func TestConnectorPublishes(t *testing.T) {
	xf := NewExtensionFactory()
	xcfg := xf.CreateDefaultConfig().(*ExtensionConfig)
	xcfg.Endpoint = "127.0.0.1:0"
	ext, err := xf.Create(context.Background(), extensiontest.NewNopSettings(xf.Type()), xcfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()

	id := component.MustNewID(ExtensionType)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ExportInterval, cfg.OpAMP = time.Hour, &id
	cfg.Suggest.Quantile = 0.9
	f := NewFactory()
	sink := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), newSettings(t), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), hostWith{id: id, ext: ext}))
	defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
	bc := c.(*budgetConnector)
	require.NoError(t, bc.ConsumeTraces(context.Background(), tracesOf(genSamples(6000, 4))))
	md := exportOnce(t, bc, sink)

	a := startAgent(t, ext.(*opampExtension).Addr().String(), "checkout", true)
	require.Eventually(t, func() bool { return len(a.got()) == 1 }, 10*time.Second, 5*time.Millisecond)
	got := a.got()[0]
	ceil := gauges(md, MetricCeiling)
	require.Len(t, got.Steps, 2)
	for step, s := range got.Steps {
		assert.InDelta(t, ceil[key{"checkout", step}]*1000, s.CeilingMS, 1e-9, step)
		assert.Equal(t, 0.9, s.Quantile)
	}
	assert.Equal(t, t0, got.WindowStart.UTC())
	fmt.Fprintln(testWriter{t}, "ceilings served:", got.Steps)
}

func newSettings(t *testing.T) connectorSettings {
	s := connectorSettingsFor(t.Name())
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
