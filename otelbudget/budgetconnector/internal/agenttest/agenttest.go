// Package agenttest is an OpAMP agent for tests: opamp-go's client over
// WebSocket or plain HTTP, identified by a service.name, that applies the
// ceilings it is sent (fleetceilings.Parse) and reports it.
package agenttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opamp-go/client"
	"github.com/open-telemetry/opamp-go/client/types"
	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// Agent is a running test agent; the test's cleanup stops it.
type Agent struct {
	c    client.OpAMPClient
	mu   sync.Mutex
	ce   []fleetceilings.Ceilings
	last []byte // the hash last applied
}

// Got returns the ceilings applied so far, oldest first.
func (a *Agent) Got() []fleetceilings.Ceilings {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]fleetceilings.Ceilings(nil), a.ce...)
}

// Options are an agent's transport settings.
type Options struct {
	// HTTP polls over plain HTTP instead of a WebSocket.
	HTTP bool
	// TLS, when set, makes the scheme wss or https.
	TLS *tls.Config
	// Header is sent with each request (the handshake, for a WebSocket).
	Header http.Header
}

// Start starts an agent of service against the OpAMP endpoint host:port +
// path.
func Start(t *testing.T, hostport, path, service string, o Options) *Agent {
	t.Helper()
	a := &Agent{}
	if o.HTTP {
		a.c = client.NewHTTP(nil)
	} else {
		a.c = client.NewWebSocket(nil)
	}
	require.NoError(t, a.c.SetAgentDescription(&protobufs.AgentDescription{IdentifyingAttributes: []*protobufs.KeyValue{
		{Key: "service.name", Value: &protobufs.AnyValue{Value: &protobufs.AnyValue_StringValue{StringValue: service}}},
	}}))
	var uid types.InstanceUid
	_, err := rand.Read(uid[:])
	require.NoError(t, err)
	heartbeat := 50 * time.Millisecond
	scheme := map[[2]bool]string{{false, false}: "ws", {false, true}: "wss", {true, false}: "http", {true, true}: "https"}[[2]bool{o.HTTP, o.TLS != nil}]
	require.NoError(t, a.c.Start(context.Background(), types.StartSettings{
		OpAMPServerURL:    scheme + "://" + hostport + path,
		InstanceUid:       uid,
		HeartbeatInterval: &heartbeat,
		TLSConfig:         o.TLS,
		Header:            o.Header,
		Capabilities: protobufs.AgentCapabilities_AgentCapabilities_AcceptsRemoteConfig |
			protobufs.AgentCapabilities_AgentCapabilities_ReportsRemoteConfig | protobufs.AgentCapabilities_AgentCapabilities_ReportsStatus |
			protobufs.AgentCapabilities_AgentCapabilities_ReportsHeartbeat,
		Callbacks: types.Callbacks{OnMessage: func(_ context.Context, msg *types.MessageData) {
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
			f := msg.RemoteConfig.GetConfig().GetConfigMap()[fleetceilings.ConfigKey]
			c, err := fleetceilings.Parse(f.GetBody())
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

// Ceilings is a valid set of one step, "fetch", with the ceiling ms.
func Ceilings(service string, ms float64) fleetceilings.Ceilings {
	return fleetceilings.Ceilings{Service: service, ComputedAt: time.Now(),
		Steps: map[string]fleetceilings.StepCeiling{"fetch": {CeilingMS: ms, EstimateMS: ms / 1.2, Quantile: 0.99, Margin: 1.2, Samples: 1000}}}
}
