package opampextension

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/open-telemetry/opamp-go/server"
	"github.com/open-telemetry/opamp-go/server/types"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension/internal/metadata"
	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// served is one service's current remote config.
type served struct {
	body []byte // the JSON body
	key  []byte // the body without computed_at: what tells a change
	hash []byte
}

// agentState is what the extension knows of one agent (one instance UID).
type agentState struct {
	service  string
	ws       *wsConn // its WebSocket, nil for plain HTTP
	sent     []byte  // the hash of the config last sent to it
	reported []byte  // the hash of the config it last reported
	status   protobufs.RemoteConfigStatuses
}

// wsConn is one WebSocket connection: the one agent it carries and the
// push waiting for it. Each connection has at most one push in flight, on
// its own goroutine, so that an agent that does not read delays no other.
type wsConn struct {
	conn    types.Connection
	uid     string                   // the agent on it; "" before its first message
	pending *protobufs.ServerToAgent // the latest push not sent yet
	sending bool
	dropped bool // a push to it failed: disconnected, counted, sent nothing more
}

// extensionImpl is the extension: an OpAMP server on the Collector's HTTP
// server, and the ceilings it serves, by service.
type extensionImpl struct {
	cfg    *Config
	set    extension.Settings
	logger *zap.Logger

	// dropped counts agents disconnected because they could not take a
	// push (it failed, or did not finish within SendTimeout); refused, agents and connections turned
	// away by MaxAgents. The Collector's telemetry has them too.
	dropped, refused atomic.Int64
	// inHandler counts the requests in the OpAMP handler (a WebSocket's
	// only until its upgrade).
	inHandler atomic.Int64
	telemetry *metadata.TelemetryBuilder

	mu       sync.Mutex
	services map[string]*served
	agents   map[string]*agentState // by instance UID
	conns    map[types.Connection]*wsConn
	host     component.Host
	srv      *http.Server
	addr     net.Addr
	closed   bool
	workers  sync.WaitGroup // the HTTP server and the pushes
}

// CeilingsPublisher is what the deadlinebudget connector calls at every
// export; the extension implements it.
type CeilingsPublisher interface {
	PublishCeilings(c fleetceilings.Ceilings)
}

var _ CeilingsPublisher = (*extensionImpl)(nil)

func newExtension(set extension.Settings, cfg *Config) (*extensionImpl, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("deadlinebudget_opamp: its telemetry: %w", err)
	}
	logger := set.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	return &extensionImpl{cfg: cfg, set: set, logger: logger, telemetry: tb, services: map[string]*served{},
		agents: map[string]*agentState{}, conns: map[types.Connection]*wsConn{}}, nil
}

// Start starts the OpAMP server on the Collector's HTTP server
// (confighttp): its listener (TLS when configured) and its handler chain
// (auth, body and decompression limits, …) before the OpAMP handler.
func (x *extensionImpl) Start(ctx context.Context, host component.Host) error {
	opamp := server.New(zapLogger{x.logger})
	handle, connContext, err := opamp.Attach(server.Settings{Callbacks: types.Callbacks{OnConnecting: x.onConnecting}})
	if err != nil {
		return fmt.Errorf("deadlinebudget_opamp: %w", err)
	}
	mux := http.NewServeMux()
	maxBody := x.cfg.maxBody()
	mux.Handle(x.cfg.path(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.inHandler.Add(1)
		defer x.inHandler.Add(-1)
		handle(&boundedHijack{ResponseWriter: w, limit: maxBody}, r)
	}))
	scfg := x.cfg.ServerConfig
	scfg.MaxRequestBodySize = maxBody
	srv, err := scfg.ToServer(ctx, host.GetExtensions(), x.set.TelemetrySettings, mux)
	if err != nil {
		return fmt.Errorf("deadlinebudget_opamp: the HTTP server: %w", err)
	}
	srv.ConnContext = connContext
	ln, err := scfg.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("deadlinebudget_opamp: listening on %s: %w", scfg.NetAddr.Endpoint, err)
	}
	x.mu.Lock()
	x.srv, x.addr, x.host = srv, ln.Addr(), host
	x.mu.Unlock()
	x.logger.Info("deadlinebudget_opamp: serving OpAMP", zap.String("endpoint", ln.Addr().String()), zap.String("path", x.cfg.path()),
		zap.Bool("tls", scfg.TLS.HasValue()), zap.Bool("auth", scfg.Auth.HasValue()))
	x.workers.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	})
	return nil
}

// Addr is the address the OpAMP server listens on, nil before Start.
func (x *extensionImpl) Addr() net.Addr {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.addr
}

// Shutdown stops the server, closes the agents' WebSockets (which ends any
// push in flight) and waits for its goroutines until ctx is done.
func (x *extensionImpl) Shutdown(ctx context.Context) error {
	x.mu.Lock()
	x.closed = true
	srv := x.srv
	x.srv = nil
	conns := make([]types.Connection, 0, len(x.conns))
	for c := range x.conns {
		conns = append(conns, c)
	}
	x.mu.Unlock()
	var err error
	if srv != nil {
		if err = srv.Shutdown(ctx); err != nil {
			err = errors.Join(err, srv.Close())
		}
	}
	for _, c := range conns {
		_ = c.Disconnect()
	}
	x.telemetry.Shutdown()
	done := make(chan struct{})
	go func() { x.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("deadlinebudget_opamp: shutdown: %w", ctx.Err()))
	}
	return err
}

// PublishCeilings makes c the config served to c.Service's agents; when it
// differs from the one served (computed_at aside), the agents connected
// over WebSocket get it at once, each on its own (a push that does not
// finish within SendTimeout disconnects that agent alone), the others at
// their next poll. A body that fails fleetceilings' validation is logged
// and not served. It does not block on the network.
func (x *extensionImpl) PublishCeilings(c fleetceilings.Ceilings) {
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
	defer x.mu.Unlock()
	if s := x.services[c.Service]; (s != nil && bytes.Equal(s.key, k)) || x.closed {
		return
	}
	sum := sha256.Sum256(body)
	s := &served{body: body, key: k, hash: sum[:]}
	x.services[c.Service] = s
	for uid, a := range x.agents {
		if a.service == c.Service && a.ws != nil {
			a.sent = s.hash
			x.pushLocked(a.ws, response([]byte(uid), s))
		}
	}
}

// pushLocked queues msg for the connection, replacing a push not sent yet,
// and starts its sender when none runs. x.mu is held.
func (x *extensionImpl) pushLocked(w *wsConn, msg *protobufs.ServerToAgent) {
	if w.dropped {
		return // disconnected; forgotten when its close is seen
	}
	w.pending = msg
	if w.sending {
		return
	}
	w.sending = true
	x.workers.Go(func() { x.send(w) })
}

// send sends the connection's pending pushes until none is left. An agent
// that cannot take a push is disconnected and counted as dropped, once,
// whatever the path: the push does not finish within SendTimeout (the
// timer disconnects it, and the blocked write then fails) or it fails
// first (the peer's connection is gone). Either the sender or the timer
// decides the push's outcome, never both: a write that returns just as the
// timer fires is a timeout, not a success followed by a stray disconnect.
// During Shutdown, which disconnects every agent, nothing is counted.
func (x *extensionImpl) send(w *wsConn) {
	defer func() {
		if r := recover(); r != nil {
			x.reportPanic(r)
		}
	}()
	for {
		x.mu.Lock()
		msg := w.pending
		w.pending = nil
		if msg == nil || x.closed {
			w.sending = false
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
		var decided atomic.Bool
		t := time.AfterFunc(x.cfg.SendTimeout, func() {
			if decided.CompareAndSwap(false, true) {
				_ = w.conn.Disconnect()
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), x.cfg.SendTimeout)
		err := w.conn.Send(ctx, msg)
		cancel()
		t.Stop()
		mine := decided.CompareAndSwap(false, true)
		if mine && err == nil {
			continue // sent in time
		}
		// Timed out (the timer owns the outcome and has disconnected it)
		// or failed: either way the agent could not take the push.
		_ = w.conn.Disconnect()
		x.mu.Lock()
		w.pending, w.sending = nil, false
		count := !w.dropped && !x.closed
		w.dropped = true
		x.mu.Unlock()
		if count {
			x.dropped.Add(1)
			x.telemetry.DeadlinebudgetOpampAgentsDropped.Add(context.Background(), 1)
			if !mine {
				x.logger.Warn("deadlinebudget_opamp: an agent did not take a push within send_timeout: disconnected",
					zap.Duration("send_timeout", x.cfg.SendTimeout))
			} else {
				// At Debug, as opamp-go's errors about one peer.
				x.logger.Debug("deadlinebudget_opamp: a push to an agent failed: disconnected", zap.Error(err))
			}
		}
		return
	}
}

func (x *extensionImpl) reportPanic(r any) {
	err := fmt.Errorf("deadlinebudget_opamp: panic: %v", r)
	x.logger.Error("deadlinebudget_opamp: recovered a panic", zap.Error(err), zap.Stack("stack"))
	x.mu.Lock()
	host := x.host
	x.mu.Unlock()
	if host != nil {
		componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
	}
}

// response is the message that carries s to the agent uid.
func response(uid []byte, s *served) *protobufs.ServerToAgent {
	msg := &protobufs.ServerToAgent{InstanceUid: uid, Capabilities: capabilities}
	if s != nil {
		msg.RemoteConfig = &protobufs.AgentRemoteConfig{
			ConfigHash: s.hash,
			Config: &protobufs.AgentConfigMap{ConfigMap: map[string]*protobufs.AgentConfigFile{
				fleetceilings.ConfigKey: {Body: s.body, ContentType: fleetceilings.ContentType},
			}},
		}
	}
	return msg
}

const capabilities = uint64(protobufs.ServerCapabilities_ServerCapabilities_AcceptsStatus |
	protobufs.ServerCapabilities_ServerCapabilities_OffersRemoteConfig)

// onConnecting accepts a connection (the Collector's auth has already
// passed it), unless it is a WebSocket beyond MaxAgents connections.
func (x *extensionImpl) onConnecting(r *http.Request) types.ConnectionResponse {
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if ws {
		x.mu.Lock()
		full := len(x.conns) >= x.cfg.MaxAgents || x.closed
		x.mu.Unlock()
		if full {
			x.countRefused()
			return types.ConnectionResponse{Accept: false, HTTPStatusCode: http.StatusServiceUnavailable,
				HTTPResponseHeader: map[string]string{"Retry-After": "30"}}
		}
	}
	return types.ConnectionResponse{Accept: true, ConnectionCallbacks: types.ConnectionCallbacks{
		OnConnected: func(_ context.Context, conn types.Connection) {
			if ws {
				x.onConnected(conn)
			}
		},
		OnMessage: func(ctx context.Context, conn types.Connection, msg *protobufs.AgentToServer) *protobufs.ServerToAgent {
			return x.onMessage(ctx, conn, ws, msg)
		},
		OnConnectionClose: x.onClose,
	}}
}

func (x *extensionImpl) countRefused() {
	x.refused.Add(1)
	x.telemetry.DeadlinebudgetOpampAgentsRefused.Add(context.Background(), 1)
}

func (x *extensionImpl) onConnected(conn types.Connection) {
	x.mu.Lock()
	closed := x.closed
	if !closed {
		x.conns[conn] = &wsConn{conn: conn}
	}
	x.mu.Unlock()
	if closed {
		_ = conn.Disconnect()
	}
}

// onMessage answers an agent: its service.name comes from its description
// (asked for again when unknown); the service's config is sent when the
// agent does not have it yet. A panic is recovered and reported, and the
// message answered with nothing.
func (x *extensionImpl) onMessage(_ context.Context, conn types.Connection, ws bool, msg *protobufs.AgentToServer) (resp *protobufs.ServerToAgent) {
	defer func() {
		if r := recover(); r != nil {
			x.reportPanic(r)
			resp = nil
		}
	}()
	if b, ok := conn.Connection().(*boundedConn); ok {
		b.delivered() // the message is read: the next one has its own bound
	}
	uid := string(msg.GetInstanceUid())
	x.mu.Lock()
	defer x.mu.Unlock()
	var w *wsConn
	if ws {
		if w = x.conns[conn]; w == nil {
			return nil // closed meanwhile
		}
		if w.uid != "" && w.uid != uid {
			// One agent per connection: a new instance UID replaces the
			// one before it, so one socket cannot fill max_agents.
			delete(x.agents, w.uid)
		}
	}
	a := x.agents[uid]
	if a == nil {
		if len(x.agents) >= x.cfg.MaxAgents && !x.forgetPlainLocked() {
			x.countRefused()
			return &protobufs.ServerToAgent{InstanceUid: msg.GetInstanceUid(), ErrorResponse: &protobufs.ServerErrorResponse{
				Type: protobufs.ServerErrorResponseType_ServerErrorResponseType_Unavailable, ErrorMessage: "too many agents (max_agents)",
				Details: &protobufs.ServerErrorResponse_RetryInfo{RetryInfo: &protobufs.RetryInfo{RetryAfterNanoseconds: uint64(30 * time.Second)}},
			}}
		}
		a = &agentState{}
		x.agents[uid] = a
	}
	if ws {
		if a.ws != nil && a.ws != w {
			a.ws.uid = "" // the UID moved to this connection
		}
		a.ws, w.uid = w, uid
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
		a.reported, a.status = st.GetLastRemoteConfigHash(), st.GetStatus()
		if a.status == protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED {
			x.logger.Warn("deadlinebudget_opamp: an agent refused the ceilings", zap.String("service", a.service), zap.String("error", st.GetErrorMessage()))
		}
	}
	if a.service == "" && msg.GetAgentDescription() == nil {
		r := response(msg.GetInstanceUid(), nil)
		r.Flags = uint64(protobufs.ServerToAgentFlags_ServerToAgentFlags_ReportFullState)
		return r
	}
	// Not to an agent that reports it has it; over a WebSocket, sent once
	// (it delivers or closes), not again when an older status crosses it.
	// A plain-HTTP agent gets it at each poll until it reports it: a lost
	// answer is not retried by anyone else.
	s := x.services[a.service]
	if s == nil || bytes.Equal(a.reported, s.hash) || (a.ws != nil && bytes.Equal(a.sent, s.hash)) {
		return response(msg.GetInstanceUid(), nil)
	}
	a.sent = s.hash
	return response(msg.GetInstanceUid(), s)
}

// forgetPlainLocked drops one agent without a WebSocket (a plain-HTTP one
// reports its full state again when asked) and reports whether there was
// one.
func (x *extensionImpl) forgetPlainLocked() bool {
	for uid, a := range x.agents {
		if a.ws == nil {
			delete(x.agents, uid)
			return true
		}
	}
	return false
}

func (x *extensionImpl) onClose(conn types.Connection) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.conns[conn]
	if w == nil {
		return
	}
	delete(x.conns, conn)
	if a := x.agents[w.uid]; w.uid != "" && a != nil && a.ws == w {
		delete(x.agents, w.uid)
	}
	w.pending = nil
}

// zapLogger is opamp-go's logger over zap. Its errors are about one peer
// (a message it could not read, a connection it lost): logged at Debug, so
// that a peer cannot fill the Collector's log; what matters to an operator
// is counted (dropped, refused) or logged at Warn by the extension itself.
type zapLogger struct{ l *zap.Logger }

func (z zapLogger) Debugf(_ context.Context, format string, v ...any) {
	z.l.Debug(fmt.Sprintf(format, v...))
}

func (z zapLogger) Errorf(_ context.Context, format string, v ...any) {
	z.l.Debug(fmt.Sprintf(format, v...))
}
