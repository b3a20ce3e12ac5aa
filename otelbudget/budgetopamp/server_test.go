package budgetopamp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/open-telemetry/opamp-go/server"
	"github.com/open-telemetry/opamp-go/server/types"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// fleetServer is an OpAMP server (opamp-go's server package, on a loopback
// port) that serves the fleet's ceilings as the contract says: per
// service.name, one remote config whose "deadline.ceilings" entry holds the
// body, sent when an agent's last reported hash differs from it, and pushed
// to the connected agents of the service whenever it changes. An agent
// that has not said its service.name on a connection (one that reconnects
// sends only what changed) is asked for its full state.
type fleetServer struct {
	t    testing.TB
	srv  server.OpAMPServer
	addr string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every status or connection change
	configs  map[string]*protobufs.AgentRemoteConfig
	agents   map[types.Connection]*agentState
	statuses []*protobufs.RemoteConfigStatus
}

type agentState struct {
	uid      []byte
	service  string
	instance string
	caps     uint64
}

// startFleetServer starts a server on addr ("127.0.0.1:0": a free port),
// stopped at the test's end.
func startFleetServer(t testing.TB, addr string) *fleetServer {
	f := &fleetServer{t: t, changed: make(chan struct{}), configs: map[string]*protobufs.AgentRemoteConfig{}, agents: map[types.Connection]*agentState{}}
	f.start(addr)
	t.Cleanup(f.kill)
	return f
}

func (f *fleetServer) start(addr string) {
	srv := server.New(nil)
	err := srv.Start(server.StartSettings{ListenEndpoint: addr, Settings: server.Settings{Callbacks: types.Callbacks{
		OnConnecting: func(*http.Request) types.ConnectionResponse {
			return types.ConnectionResponse{Accept: true, ConnectionCallbacks: types.ConnectionCallbacks{
				OnMessage:         f.onMessage,
				OnConnectionClose: f.onClose,
			}}
		},
	}}})
	require.NoError(f.t, err)
	f.mu.Lock()
	f.srv, f.addr = srv, srv.Addr().String()
	f.mu.Unlock()
}

// endpoint is the WebSocket URL a client connects to.
func (f *fleetServer) endpoint() string { return "ws://" + f.addr + "/v1/opamp" }

func (f *fleetServer) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fleetServer) onMessage(_ context.Context, conn types.Connection, msg *protobufs.AgentToServer) *protobufs.ServerToAgent {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[conn]
	if a == nil {
		a = &agentState{}
		f.agents[conn] = a
		defer f.signal()
	}
	a.uid = msg.InstanceUid
	if msg.Capabilities != 0 {
		a.caps = msg.Capabilities
	}
	if d := msg.AgentDescription; d != nil {
		for _, kv := range d.IdentifyingAttributes {
			switch kv.Key {
			case "service.name":
				a.service = kv.Value.GetStringValue()
			case "service.instance.id":
				a.instance = kv.Value.GetStringValue()
			}
		}
	}
	resp := &protobufs.ServerToAgent{InstanceUid: msg.InstanceUid}
	if a.service == "" {
		// An agent that reconnects sends only what changed (OpAMP's status
		// compression): ask it for its description, as the spec says a
		// server that does not know an agent does.
		resp.Flags = uint64(protobufs.ServerToAgentFlags_ServerToAgentFlags_ReportFullState)
	}
	if st := msg.RemoteConfigStatus; st != nil && len(st.LastRemoteConfigHash) > 0 {
		f.statuses = append(f.statuses, st)
		f.signal()
	}
	if rc := f.configs[a.service]; rc != nil {
		var last []byte
		if msg.RemoteConfigStatus != nil {
			last = msg.RemoteConfigStatus.LastRemoteConfigHash
		}
		if !bytes.Equal(last, rc.ConfigHash) {
			resp.RemoteConfig = rc
		}
	}
	return resp
}

func (f *fleetServer) onClose(conn types.Connection) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.agents, conn)
	f.signal()
}

// remoteConfig is the contract's remote config for body.
func remoteConfig(body []byte, contentType string) *protobufs.AgentRemoteConfig {
	h := sha256.Sum256(append([]byte(contentType+"\x00"), body...))
	return &protobufs.AgentRemoteConfig{
		Config:     &protobufs.AgentConfigMap{ConfigMap: map[string]*protobufs.AgentConfigFile{budgetopamp.ConfigKey: {Body: body, ContentType: contentType}}},
		ConfigHash: h[:],
	}
}

// push makes rc the service's config and sends it to its connected agents;
// it returns when the sends were written, with the instant before them.
func (f *fleetServer) push(service string, rc *protobufs.AgentRemoteConfig) time.Time {
	f.mu.Lock()
	f.configs[service] = rc
	var conns []types.Connection
	var uids [][]byte
	for c, a := range f.agents {
		if a.service == service {
			conns, uids = append(conns, c), append(uids, a.uid)
		}
	}
	f.mu.Unlock()
	at := time.Now()
	for i, c := range conns {
		_ = c.Send(context.Background(), &protobufs.ServerToAgent{InstanceUid: uids[i], RemoteConfig: rc})
	}
	return at
}

// agent waits for a connected agent of service and returns its state.
func (f *fleetServer) agent(service string) agentState {
	var out agentState
	f.wait(func() bool {
		for _, a := range f.agents {
			if a.service == service {
				out = *a
				return true
			}
		}
		return false
	})
	return out
}

// status waits for the agent's status report on the config of hash.
func (f *fleetServer) status(hash []byte) *protobufs.RemoteConfigStatus {
	var out *protobufs.RemoteConfigStatus
	f.wait(func() bool {
		for _, s := range f.statuses {
			if bytes.Equal(s.LastRemoteConfigHash, hash) {
				out = s
			}
		}
		return out != nil
	})
	return out
}

// wait waits, 20 s at most, for cond (called under f.mu) to hold.
func (f *fleetServer) wait(cond func() bool) {
	f.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			f.t.Fatal("fleetServer: timed out waiting")
		}
	}
}

// kill stops the server as a crash would, for the clients: it stops
// listening and drops every open connection. A second call does nothing.
func (f *fleetServer) kill() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	conns := make([]types.Connection, 0, len(f.agents))
	for c := range f.agents {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(f.t, srv.Stop(ctx))
	for _, c := range conns {
		_ = c.Disconnect()
	}
	f.wait(func() bool { return len(f.agents) == 0 })
}
