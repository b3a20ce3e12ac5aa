package budgetopamp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"mime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/open-telemetry/opamp-go/client"
	"github.com/open-telemetry/opamp-go/client/types"
	"github.com/open-telemetry/opamp-go/protobufs"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// Sink is what a [Client] feeds: the live ceilings of the process's
// policies. [*learn.Live] is one ([learn.Live.SetPriors]): each body
// applied replaces the priors of every step at once, and a step serves its
// prior until its own recent samples suffice, never above the Live's Max.
// SetPriors must refuse what it cannot take, changing nothing, and must not
// block: it runs on the client's receiving goroutine.
type Sink interface {
	SetPriors(priors map[string]learn.Prior) error
}

var _ Sink = (*learn.Live)(nil)

// Client is a running OpAMP client that applies the fleet's ceilings to a
// [Sink]. It is safe for concurrent use. Stop it with [Client.Stop].
type Client struct {
	opamp  client.OpAMPClient
	sink   Sink
	cfg    config
	logger *slog.Logger

	stopOnce sync.Once
	stopErr  error

	firstApplied chan struct{} // closed when the first body is applied

	mu     sync.Mutex
	status Status
	last   *protobufs.RemoteConfigStatus // the answer to the last config received
}

// Status is what a [Client] has done so far.
type Status struct {
	// Connected is true from the last successful WebSocket handshake with
	// the server until an attempt to connect fails, or Stop: opamp-go
	// reports a lost connection when its first reconnection fails, so a
	// connection lost and made again at once leaves it true.
	Connected bool
	// ConnectError is the last failure to connect; nil once connected.
	ConnectError error
	// Ceilings is the last body applied, AppliedAt when (this process's
	// clock) and Hash the remote config's hash; zero values before any.
	// They stay after the connection is lost: so do the ceilings.
	Ceilings  Ceilings
	AppliedAt time.Time
	Hash      []byte
	// Applied counts the bodies applied, Refused those refused (reported
	// FAILED); LastRefusal is the last refusal's error, nil once a later
	// body is applied.
	Applied, Refused int
	LastRefusal      error
}

// Start starts an OpAMP client (opamp-go's, over WebSocket) that connects
// to endpoint (ws:// or wss://, e.g. ws://collector:4320/v1/opamp), and
// returns at once: connecting, and reconnecting with an exponential backoff
// (0.5 s growing to 60 s) whenever the connection is lost, happen in the
// background until [Client.Stop]. The client identifies itself by the
// identifying attributes service.name ([WithServiceName]) and
// service.instance.id ([WithInstanceID]), advertises the capabilities
// AcceptsRemoteConfig and ReportsRemoteConfig, and applies each remote
// configuration the server pushes:
//
//   - its [ConfigKey] entry must hold a body that [ParseCeilings] accepts,
//     of content type [ContentType], computed for this service.name, with
//     no step's ceiling below the client's floor ([WithMinCeiling], 1 ms
//     by default);
//   - its steps become sink's priors, replacing the previous ones at once
//     ([Sink]; a step the body omits loses its prior);
//   - the client answers APPLIED with the config's hash, or FAILED with a
//     message naming what was wrong, and then nothing changed: the sink
//     keeps the ceilings it had.
//
// Losing the connection changes nothing in the sink: the last ceilings
// applied stay, and the process's own learning goes on. A config whose
// hash is the one last received is answered as it was, without being
// applied (or refused) again. ctx bounds Start alone, not the client's
// life: a ctx already done fails Start with its error. Invalid arguments
// or options fail Start with a [*ConfigError] ([ErrInvalidConfig]), and
// nothing is started.
func Start(ctx context.Context, endpoint string, sink Sink, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := newConfig(endpoint, sink, opts)
	if err != nil {
		return nil, err
	}
	uid, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("budgetopamp: an instance UID: %w", err)
	}
	if parsed, perr := uuid.Parse(cfg.instance); perr == nil {
		uid = parsed
	}
	if cfg.instance == "" {
		cfg.instance = uid.String()
	}
	logger := cfg.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{sink: sink, cfg: cfg, logger: logger, firstApplied: make(chan struct{})}
	c.opamp = client.NewWebSocket(opampLogger{logger})
	desc := &protobufs.AgentDescription{IdentifyingAttributes: []*protobufs.KeyValue{
		stringKV(string(semconv.ServiceNameKey), cfg.service),
		stringKV(string(semconv.ServiceInstanceIDKey), cfg.instance),
	}}
	if err := c.opamp.SetAgentDescription(desc); err != nil {
		return nil, fmt.Errorf("budgetopamp: the agent description: %w", err)
	}
	caps := protobufs.AgentCapabilities_AgentCapabilities_ReportsStatus |
		protobufs.AgentCapabilities_AgentCapabilities_AcceptsRemoteConfig |
		protobufs.AgentCapabilities_AgentCapabilities_ReportsRemoteConfig
	if err := c.opamp.SetCapabilities(&caps); err != nil {
		return nil, fmt.Errorf("budgetopamp: the capabilities: %w", err)
	}
	settings := types.StartSettings{
		OpAMPServerURL: endpoint,
		Header:         cfg.header,
		TLSConfig:      cfg.tls,
		InstanceUid:    types.InstanceUid(uid),
		Callbacks: types.Callbacks{
			OnConnect:       c.onConnect,
			OnConnectFailed: c.onConnectFailed,
			OnMessage:       c.onMessage,
		},
	}
	if err := c.opamp.Start(ctx, settings); err != nil {
		return nil, fmt.Errorf("budgetopamp: starting the OpAMP client: %w", err)
	}
	return c, nil
}

func stringKV(k, v string) *protobufs.KeyValue {
	return &protobufs.KeyValue{Key: k, Value: &protobufs.AnyValue{Value: &protobufs.AnyValue_StringValue{StringValue: v}}}
}

// Stop disconnects from the server and stops the client's goroutines,
// waiting for them until ctx is done (then it returns ctx's error and they
// end on their own soon after). The sink keeps the ceilings applied last.
// Later calls return the first call's result.
func (c *Client) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if err := c.opamp.Stop(ctx); err != nil {
			c.stopErr = fmt.Errorf("budgetopamp: stopping the OpAMP client: %w", err)
		}
		c.mu.Lock()
		c.status.Connected = false
		c.mu.Unlock()
	})
	return c.stopErr
}

// Status returns what the client has done so far: a copy, safe to keep.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Hash = bytes.Clone(s.Hash)
	s.Ceilings.Steps = maps(s.Ceilings.Steps)
	return s
}

// FirstApplied returns a channel that is closed once the client has
// applied its first body: by then the sink holds its ceilings
// ([Sink.SetPriors] has returned) and [Client.Status] counts it in Applied.
// A body refused does not close it; neither does Stop, nor a lost
// connection. A process that would rather start with the fleet's ceilings
// than cold waits on it with a bound of its own:
//
//	select {
//	case <-client.FirstApplied():
//	case <-time.After(2 * time.Second): // start cold; they apply when they come
//	}
func (c *Client) FirstApplied() <-chan struct{} { return c.firstApplied }

func maps(m map[string]StepCeiling) map[string]StepCeiling {
	if m == nil {
		return nil
	}
	out := make(map[string]StepCeiling, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *Client) onConnect(context.Context) {
	c.mu.Lock()
	c.status.Connected, c.status.ConnectError = true, nil
	c.mu.Unlock()
}

func (c *Client) onConnectFailed(_ context.Context, err error) {
	c.mu.Lock()
	c.status.Connected, c.status.ConnectError = false, err
	c.mu.Unlock()
}

func (c *Client) onMessage(ctx context.Context, msg *types.MessageData) {
	rc := msg.RemoteConfig
	if rc == nil {
		return
	}
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && len(rc.ConfigHash) > 0 && bytes.Equal(rc.ConfigHash, last.LastRemoteConfigHash) {
		// Sent again (a server answers each message whose status it has
		// not seen yet with the config): the same answer, nothing redone.
		c.report(ctx, last)
		return
	}
	status := &protobufs.RemoteConfigStatus{LastRemoteConfigHash: bytes.Clone(rc.ConfigHash), Status: protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED}
	ceilings, err := c.read(rc)
	if err == nil {
		err = c.sink.SetPriors(priors(ceilings))
	}
	c.mu.Lock()
	if err != nil {
		c.status.Refused++
		c.status.LastRefusal = err
		status.Status = protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED
		status.ErrorMessage = err.Error()
	} else {
		c.status.Applied++
		c.status.Ceilings, c.status.AppliedAt, c.status.Hash, c.status.LastRefusal = ceilings, time.Now(), bytes.Clone(rc.ConfigHash), nil
		if c.status.Applied == 1 {
			close(c.firstApplied)
		}
	}
	c.last = status
	c.mu.Unlock()
	if err != nil {
		c.logger.WarnContext(ctx, "budgetopamp: fleet ceilings refused, the previous ones kept", "error", err, "hash", fmt.Sprintf("%x", rc.ConfigHash))
	} else {
		c.logger.InfoContext(ctx, "budgetopamp: fleet ceilings applied", "service", ceilings.Service, "steps", len(ceilings.Steps),
			"computed_at", ceilings.ComputedAt, "hash", fmt.Sprintf("%x", rc.ConfigHash))
	}
	c.report(ctx, status)
}

// report sends status to the server with the next message.
func (c *Client) report(ctx context.Context, status *protobufs.RemoteConfigStatus) {
	if err := c.opamp.SetRemoteConfigStatus(status); err != nil {
		c.logger.ErrorContext(ctx, "budgetopamp: reporting the remote config status", "error", err)
	}
}

// read returns the ceilings of rc, checked.
func (c *Client) read(rc *protobufs.AgentRemoteConfig) (Ceilings, error) {
	var files map[string]*protobufs.AgentConfigFile
	if rc.Config != nil {
		files = rc.Config.ConfigMap
	}
	f, ok := files[ConfigKey]
	if !ok || f == nil {
		keys := make([]string, 0, len(files))
		for k := range files {
			keys = append(keys, fmt.Sprintf("%q", k))
		}
		slices.Sort(keys)
		return Ceilings{}, &BodyError{Field: "config_map", Value: fmt.Sprintf("%v", keys), Allowed: fmt.Sprintf("an entry %q", ConfigKey)}
	}
	if f.ContentType != "" {
		if mt, _, err := mime.ParseMediaType(f.ContentType); err != nil || mt != ContentType {
			return Ceilings{}, &BodyError{Field: "content_type", Value: fmt.Sprintf("%q", f.ContentType), Allowed: fmt.Sprintf("%q", ContentType)}
		}
	}
	ceilings, err := ParseCeilings(f.Body)
	if err != nil {
		return Ceilings{}, err
	}
	if ceilings.Service != c.cfg.service {
		return Ceilings{}, &BodyError{Field: "service", Value: fmt.Sprintf("%q", ceilings.Service), Allowed: fmt.Sprintf("%q, this client's service.name", c.cfg.service)}
	}
	names := make([]string, 0, len(ceilings.Steps))
	for name := range ceilings.Steps {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if s := ceilings.Steps[name]; s.Ceiling() < c.cfg.minCeiling {
			return Ceilings{}, &BodyError{Field: fmt.Sprintf("steps[%q].ceiling_ms", name), Value: s.CeilingMS,
				Allowed: fmt.Sprintf(">= %v, this client's floor (WithMinCeiling)", c.cfg.minCeiling)}
		}
	}
	return ceilings, nil
}

// priors returns c's steps as learn priors.
func priors(c Ceilings) map[string]learn.Prior {
	p := make(map[string]learn.Prior, len(c.Steps))
	for name, s := range c.Steps {
		p[name] = learn.Prior{Ceiling: s.Ceiling(), Quantile: s.Quantile, Samples: s.Samples, First: c.WindowStart, Last: c.WindowEnd}
	}
	return p
}

// opampLogger is opamp-go's logger on a slog.Logger.
type opampLogger struct{ l *slog.Logger }

func (o opampLogger) Debugf(ctx context.Context, format string, v ...any) {
	if o.l.Enabled(ctx, slog.LevelDebug) {
		o.l.DebugContext(ctx, "opamp: "+fmt.Sprintf(format, v...))
	}
}

func (o opampLogger) Errorf(ctx context.Context, format string, v ...any) {
	if o.l.Enabled(ctx, slog.LevelError) {
		o.l.ErrorContext(ctx, "opamp: "+fmt.Sprintf(format, v...))
	}
}
