package budgetopamp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// ErrInvalidConfig is matched (errors.Is) by every [*ConfigError].
var ErrInvalidConfig = errors.New("budgetopamp: invalid configuration")

// ConfigError is a [Start] argument or option that is not valid: Field
// names it ("endpoint", "WithServiceName"), Value is what was given and
// Allowed what is accepted. It matches [ErrInvalidConfig].
type ConfigError struct {
	Field   string
	Value   any
	Allowed string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("budgetopamp: invalid %s %v: want %s", e.Field, e.Value, e.Allowed)
}

// Is makes a *ConfigError match [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Option configures [Start].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// DefaultMinCeiling is the floor of a pushed ceiling when [WithMinCeiling]
// is not given: a body with a step's ceiling below it is refused.
const DefaultMinCeiling = time.Millisecond

type config struct {
	service, instance string
	minCeiling        time.Duration
	logger            *slog.Logger
	header            http.Header
	tls               *tls.Config
	err               error
}

func (c *config) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &ConfigError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithServiceName sets the service.name the client identifies itself with
// (an identifying attribute of its OpAMP agent description): the server
// sends the ceilings computed for that service, and a body computed for
// another is refused. It must be the service.name of the resource the
// process's spans carry. The default is the environment variable
// OTEL_SERVICE_NAME; with neither, Start fails.
func WithServiceName(name string) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			c.fail("WithServiceName", `""`, "a non-empty service.name")
		}
		c.service = name
	})
}

// WithInstanceID sets the service.instance.id the client reports (an
// identifying attribute too). When it is a UUID, it is also the OpAMP
// instance UID; otherwise, and by default, the client draws a version 7
// UUID for the instance UID, and the default service.instance.id is that
// UUID.
func WithInstanceID(id string) Option {
	return optionFunc(func(c *config) {
		if id == "" {
			c.fail("WithInstanceID", `""`, "a non-empty service.instance.id (or no WithInstanceID: a fresh UUID)")
		}
		c.instance = id
	})
}

// WithLogger sets where the client logs: each body applied (Info), each
// one refused (Warn), and opamp-go's own messages (connection failures at
// Error, each retry included; the rest at Debug). The default logs
// nothing; [Client.Status] says what happened either way.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.fail("WithLogger", "nil", "a *slog.Logger")
		}
		c.logger = l
	})
}

// WithHeader sets HTTP headers sent with the WebSocket handshake (an
// authorization header, say). The header is cloned.
func WithHeader(h http.Header) Option {
	return optionFunc(func(c *config) { c.header = h.Clone() })
}

// WithTLS sets the TLS configuration of a wss:// endpoint (nil: the
// system's roots). With it, an endpoint given as ws:// is dialled as wss://.
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(c *config) { c.tls = cfg })
}

// WithMinCeiling sets the floor of a pushed ceiling (default
// [DefaultMinCeiling], 1 ms): a body in which a step's ceiling is below it
// is refused whole (answered FAILED, counted in [Status].Refused), and the
// sink keeps what it had. A server, or anyone on a plaintext path, then
// cannot cut every attempt of the process to nothing. Set it to the
// policies' floor, or above. It must be > 0.
func WithMinCeiling(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("WithMinCeiling", d, "a floor > 0, e.g. 1ms or the policy's floor")
		}
		c.minCeiling = d
	})
}

func newConfig(endpoint string, sink Sink, opts []Option) (config, error) {
	c := config{service: os.Getenv("OTEL_SERVICE_NAME"), minCeiling: DefaultMinCeiling}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err != nil {
		return c, c.err
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Host == "":
		return c, &ConfigError{Field: "endpoint", Value: fmt.Sprintf("%q", endpoint), Allowed: "an OpAMP server's WebSocket URL, e.g. ws://127.0.0.1:4320/v1/opamp"}
	case u.Scheme != "ws" && u.Scheme != "wss":
		return c, &ConfigError{Field: "endpoint", Value: fmt.Sprintf("%q", endpoint), Allowed: "a ws:// or wss:// URL: OpAMP over WebSocket, so that the server pushes new ceilings at once (OpAMP's plain-HTTP polling is not supported)"}
	case sink == nil || isNilLive(sink):
		return c, &ConfigError{Field: "sink", Value: "nil", Allowed: "a Sink, e.g. the *learn.Live of the policies' ceilings"}
	case c.service == "":
		return c, &ConfigError{Field: "WithServiceName", Value: `""`, Allowed: "a service.name (WithServiceName, or the OTEL_SERVICE_NAME environment variable): the server selects the ceilings by it"}
	}
	return c, nil
}

func isNilLive(s Sink) bool {
	l, ok := s.(*learn.Live)
	return ok && l == nil
}
