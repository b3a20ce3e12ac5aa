package budgetconnector

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/open-telemetry/opamp-go/server"
	"github.com/open-telemetry/opamp-go/server/types"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/metadata"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// ExtensionType names the OpAMP extension in a Collector's configuration.
const ExtensionType = "deadlinebudget_opamp"

// ExtensionStability is the OpAMP extension's stability.
const ExtensionStability = metadata.ExtensionStability

// Defaults of [ExtensionConfig].
const (
	// DefaultOpAMPEndpoint is where the extension listens.
	DefaultOpAMPEndpoint = "localhost:4320"
	// DefaultOpAMPPath is the URL path of the OpAMP endpoint.
	DefaultOpAMPPath = "/v1/opamp"
	// DefaultMaxAgents bounds the agents the extension remembers.
	DefaultMaxAgents = 10000
)

// ExtensionConfig is the OpAMP extension's configuration (the
// `deadlinebudget_opamp` key of the extensions section).
type ExtensionConfig struct {
	// Endpoint is the host:port the OpAMP server listens on (WebSocket
	// and plain HTTP, on one path).
	Endpoint string `mapstructure:"endpoint"`
	// Path is the URL path; "" means DefaultOpAMPPath.
	Path string `mapstructure:"path"`
	// MaxAgents is the most agents remembered (their service.name and
	// the config last sent); >= 1.
	MaxAgents int `mapstructure:"max_agents"`

	_ struct{}
}

// Validate checks the configuration: an endpoint host:port, a path that
// starts with "/", MaxAgents >= 1.
func (c *ExtensionConfig) Validate() error {
	if _, _, err := net.SplitHostPort(c.Endpoint); err != nil {
		return &ConfigError{Field: "endpoint", Value: c.Endpoint, Allowed: "host:port, e.g. localhost:4320", Err: err}
	}
	if c.Path != "" && c.Path[0] != '/' {
		return &ConfigError{Field: "path", Value: c.Path, Allowed: `a URL path starting with "/", e.g. /v1/opamp`}
	}
	if c.MaxAgents < 1 {
		return &ConfigError{Field: "max_agents", Value: c.MaxAgents, Allowed: ">= 1"}
	}
	return nil
}

// NewExtensionFactory returns the factory of the OpAMP extension: an
// OpAMP server that serves each connected agent the fleet's ceilings for
// its service.name as remote configuration (docs/fleet.md), fed by a
// deadlinebudget connector whose `opamp` setting names it.
func NewExtensionFactory() extension.Factory {
	return extension.NewFactory(metadata.ExtensionType,
		func() component.Config {
			return &ExtensionConfig{Endpoint: DefaultOpAMPEndpoint, Path: DefaultOpAMPPath, MaxAgents: DefaultMaxAgents}
		},
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return newOpAMPExtension(set.Logger, cfg.(*ExtensionConfig)), nil
		},
		ExtensionStability)
}

// served is one service's current remote config.
type served struct {
	body []byte // the JSON body
	key  []byte // the body without computed_at: what tells a change
	hash []byte
}

// agentState is what the extension knows of one agent.
type agentState struct {
	service  string
	conn     types.Connection // its WebSocket, nil for plain HTTP
	sent     []byte           // the hash of the config last sent to it
	reported []byte           // the hash of the config it last reported
	status   protobufs.RemoteConfigStatuses
	errMsg   string
}

// opampExtension is the extension: an OpAMP server and the ceilings it
// serves, by service.
type opampExtension struct {
	cfg    *ExtensionConfig
	logger *zap.Logger

	mu       sync.Mutex
	services map[string]*served
	agents   map[string]*agentState // by instance UID
	srv      server.OpAMPServer
	sends    sync.WaitGroup
	closed   bool
}

var _ CeilingsPublisher = (*opampExtension)(nil)

func newOpAMPExtension(logger *zap.Logger, cfg *ExtensionConfig) *opampExtension {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &opampExtension{cfg: cfg, logger: logger, services: map[string]*served{}, agents: map[string]*agentState{}}
}

// Start starts the OpAMP server on the configured endpoint.
func (x *opampExtension) Start(_ context.Context, _ component.Host) error {
	path := x.cfg.Path
	if path == "" {
		path = DefaultOpAMPPath
	}
	srv := server.New(zapLogger{x.logger})
	err := srv.Start(server.StartSettings{
		ListenEndpoint: x.cfg.Endpoint,
		ListenPath:     path,
		Settings: server.Settings{Callbacks: types.Callbacks{
			OnConnecting: func(r *http.Request) types.ConnectionResponse {
				// A WebSocket can be pushed to; a plain HTTP agent polls.
				ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
				return types.ConnectionResponse{Accept: true, ConnectionCallbacks: types.ConnectionCallbacks{
					OnMessage: func(ctx context.Context, conn types.Connection, msg *protobufs.AgentToServer) *protobufs.ServerToAgent {
						return x.onMessage(ctx, conn, ws, msg)
					},
					OnConnectionClose: x.onClose,
				}}
			},
		}},
	})
	if err != nil {
		return fmt.Errorf("deadlinebudget_opamp: listening on %s: %w", x.cfg.Endpoint, err)
	}
	x.mu.Lock()
	x.srv = srv
	x.mu.Unlock()
	return nil
}

// Addr is the address the OpAMP server listens on, nil before Start.
func (x *opampExtension) Addr() net.Addr {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.srv == nil {
		return nil
	}
	return x.srv.Addr()
}

// Shutdown closes the agents' WebSockets and stops the server.
func (x *opampExtension) Shutdown(ctx context.Context) error {
	x.mu.Lock()
	x.closed = true
	srv := x.srv
	x.srv = nil
	var conns []types.Connection
	for _, a := range x.agents {
		if a.conn != nil {
			conns = append(conns, a.conn)
		}
	}
	x.mu.Unlock()
	x.sends.Wait()
	var err error
	if srv != nil {
		err = srv.Stop(ctx)
	}
	for _, c := range conns {
		_ = c.Disconnect()
	}
	return err
}

// PublishCeilings makes c the config served to c.Service's agents; when it
// differs from the one served (computed_at aside), the agents connected
// over WebSocket get it at once, the others at their next poll. A body
// that fails budgetopamp's validation is logged and not served.
func (x *opampExtension) PublishCeilings(c budgetopamp.Ceilings) {
	if err := c.Validate(); err != nil {
		x.logger.Warn("deadlinebudget_opamp: ceilings not served", zap.String("service", c.Service), zap.Error(err))
		return
	}
	body, err := c.MarshalJSON()
	if err != nil {
		x.logger.Warn("deadlinebudget_opamp: ceilings not served", zap.String("service", c.Service), zap.Error(err))
		return
	}
	c.ComputedAt = time.Time{}
	k, _ := c.MarshalJSON()
	x.mu.Lock()
	if s := x.services[c.Service]; (s != nil && bytes.Equal(s.key, k)) || x.closed {
		x.mu.Unlock()
		return
	}
	sum := sha256.Sum256(body)
	s := &served{body: body, key: k, hash: sum[:]}
	x.services[c.Service] = s
	type push struct {
		conn types.Connection
		msg  *protobufs.ServerToAgent
	}
	var pushes []push
	for uid, a := range x.agents {
		if a.service == c.Service && a.conn != nil {
			a.sent = s.hash
			pushes = append(pushes, push{a.conn, x.response([]byte(uid), s)})
		}
	}
	x.sends.Add(1)
	x.mu.Unlock()
	go func() {
		defer x.sends.Done()
		for _, p := range pushes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := p.conn.Send(ctx, p.msg); err != nil {
				x.logger.Debug("deadlinebudget_opamp: push failed", zap.Error(err))
			}
			cancel()
		}
	}()
}

// response is the message that carries s to the agent uid.
func (x *opampExtension) response(uid []byte, s *served) *protobufs.ServerToAgent {
	msg := &protobufs.ServerToAgent{InstanceUid: uid, Capabilities: capabilities}
	if s != nil {
		msg.RemoteConfig = &protobufs.AgentRemoteConfig{
			ConfigHash: s.hash,
			Config: &protobufs.AgentConfigMap{ConfigMap: map[string]*protobufs.AgentConfigFile{
				budgetopamp.ConfigKey: {Body: s.body, ContentType: budgetopamp.ContentType},
			}},
		}
	}
	return msg
}

const capabilities = uint64(protobufs.ServerCapabilities_ServerCapabilities_AcceptsStatus |
	protobufs.ServerCapabilities_ServerCapabilities_OffersRemoteConfig)

// onMessage answers an agent: its service.name comes from its description
// (asked for again when unknown); the service's config is sent when the
// agent does not have it yet.
func (x *opampExtension) onMessage(_ context.Context, conn types.Connection, ws bool, msg *protobufs.AgentToServer) *protobufs.ServerToAgent {
	uid := string(msg.GetInstanceUid())
	x.mu.Lock()
	defer x.mu.Unlock()
	a := x.agents[uid]
	if a == nil {
		if len(x.agents) >= x.cfg.MaxAgents {
			x.forgetIdle()
		}
		a = &agentState{}
		x.agents[uid] = a
	}
	if ws {
		a.conn = conn
	}
	if d := msg.GetAgentDescription(); d != nil {
		a.service = ""
		for _, kv := range d.GetIdentifyingAttributes() {
			if kv.GetKey() == "service.name" {
				a.service = kv.GetValue().GetStringValue()
			}
		}
	}
	if st := msg.GetRemoteConfigStatus(); st != nil {
		a.reported, a.status, a.errMsg = st.GetLastRemoteConfigHash(), st.GetStatus(), st.GetErrorMessage()
		if a.status == protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED {
			x.logger.Warn("deadlinebudget_opamp: an agent refused the ceilings", zap.String("service", a.service), zap.String("error", a.errMsg))
		}
	}
	if a.service == "" && msg.GetAgentDescription() == nil {
		resp := x.response(msg.GetInstanceUid(), nil)
		resp.Flags = uint64(protobufs.ServerToAgentFlags_ServerToAgentFlags_ReportFullState)
		return resp
	}
	// Not to an agent that reports it has it; over a WebSocket, sent once
	// (it delivers or closes), not again when an older status crosses it.
	// A plain-HTTP agent gets it at each poll until it reports it: a lost
	// answer is not retried by anyone else.
	s := x.services[a.service]
	if s == nil || bytes.Equal(a.reported, s.hash) || (a.conn != nil && bytes.Equal(a.sent, s.hash)) {
		return x.response(msg.GetInstanceUid(), nil)
	}
	a.sent = s.hash
	return x.response(msg.GetInstanceUid(), s)
}

// forgetIdle drops the agents without a WebSocket (plain HTTP ones report
// their full state again when asked).
func (x *opampExtension) forgetIdle() {
	for uid, a := range x.agents {
		if a.conn == nil {
			delete(x.agents, uid)
		}
	}
}

func (x *opampExtension) onClose(conn types.Connection) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for uid, a := range x.agents {
		if a.conn == conn {
			delete(x.agents, uid)
		}
	}
}

// zapLogger is opamp-go's logger over zap.
type zapLogger struct{ l *zap.Logger }

func (z zapLogger) Debugf(_ context.Context, format string, v ...any) {
	z.l.Debug(fmt.Sprintf(format, v...))
}

func (z zapLogger) Errorf(_ context.Context, format string, v ...any) {
	z.l.Warn(fmt.Sprintf(format, v...))
}
