package budgetopamp_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/open-telemetry/opamp-go/server"
	"github.com/open-telemetry/opamp-go/server/types"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// A process starts cold: its live ceilings know nothing. The client
// connects to the OpAMP server (here opamp-go's, on loopback, serving one
// fixed body; in a fleet, the Collector's), which answers its first message
// with the fleet's ceilings: the policy's first attempt is already limited
// by the fleet's p99 × 1.2, clamped to the policy's Max.
func ExampleStart() {
	body := []byte(`{"schema":"deadline.fleet.ceilings/v1","service":"checkout","steps":{
		"fetch":{"ceiling_ms":123.4,"estimate_ms":102.8,"quantile":0.99,"margin":1.2,"samples":5000,"censored":120},
		"search":{"ceiling_ms":9000,"estimate_ms":7500,"quantile":0.99,"margin":1.2,"samples":800,"censored":3}}}`)
	addr, stop, err := exampleServer(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 2 * time.Second}})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := budgetopamp.Start(context.Background(), "ws://"+addr+"/v1/opamp", live,
		budgetopamp.WithServiceName("checkout"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = client.Stop(context.Background()) }()

	select { // the server answers the client's first message with the ceilings
	case <-client.FirstApplied():
	case <-time.After(10 * time.Second):
		fmt.Println("no ceilings from the fleet: starting cold")
	}
	p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: time.Second, Ceiling: live, Hooks: rec.Hooks()}
	_, _ = deadline.Do(context.Background(), deadline.New(5*time.Second), p, func(_ context.Context, a deadline.AttemptInfo) (int, error) {
		fmt.Println("fetch attempt:", a.Ceiling, a.LimitedBy, a.CeilingQuantile)
		return 1, nil
	})
	lc, _ := live.Ceiling("search")
	fmt.Println("search:", lc.Ceiling, "(the fleet said 9s; the policy's Max is 2s)")
	// Output:
	// fetch attempt: 123.4ms learned_ceiling 0.99
	// search: 2s (the fleet said 9s; the policy's Max is 2s)
}

// exampleServer starts an OpAMP server on loopback that sends body as the
// remote config of every agent that has not applied it, and returns its
// address and its stop.
func exampleServer(body []byte) (addr string, stop func(), err error) {
	rc := &protobufs.AgentRemoteConfig{
		Config: &protobufs.AgentConfigMap{ConfigMap: map[string]*protobufs.AgentConfigFile{
			budgetopamp.ConfigKey: {Body: body, ContentType: budgetopamp.ContentType},
		}},
		ConfigHash: []byte("v1"),
	}
	srv := server.New(nil)
	err = srv.Start(server.StartSettings{ListenEndpoint: "127.0.0.1:0", Settings: server.Settings{Callbacks: types.Callbacks{
		OnConnecting: func(*http.Request) types.ConnectionResponse {
			return types.ConnectionResponse{Accept: true, ConnectionCallbacks: types.ConnectionCallbacks{
				OnMessage: func(_ context.Context, _ types.Connection, msg *protobufs.AgentToServer) *protobufs.ServerToAgent {
					resp := &protobufs.ServerToAgent{InstanceUid: msg.InstanceUid}
					if st := msg.RemoteConfigStatus; st == nil || string(st.LastRemoteConfigHash) != "v1" {
						resp.RemoteConfig = rc
					}
					return resp
				},
			}}
		},
	}}})
	if err != nil {
		return "", nil, err
	}
	return srv.Addr().String(), func() { _ = srv.Stop(context.Background()) }, nil
}
