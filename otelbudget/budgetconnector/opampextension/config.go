package opampextension

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
)

// Defaults of [Config].
const (
	// DefaultEndpoint is where the extension listens: the loopback
	// interface only. Serving other hosts is a choice made in the
	// configuration, with tls and auth beside it (docs/fleet.md).
	DefaultEndpoint = "localhost:4320"
	// DefaultPath is the URL path of the OpAMP endpoint.
	DefaultPath = "/v1/opamp"
	// DefaultMaxAgents bounds the agents (instance UIDs) the extension
	// remembers, and its open WebSocket connections.
	DefaultMaxAgents = 10000
	// DefaultMaxRequestBodySize bounds an agent's message, compressed or
	// not, over plain HTTP and over WebSocket: a budgetopamp client's
	// message is under 1 KiB.
	DefaultMaxRequestBodySize = 1 << 20
	// DefaultSendTimeout bounds one push to one agent: an agent that does
	// not take it in time is disconnected and counted.
	DefaultSendTimeout = 5 * time.Second
)

// Config is the deadlinebudget_opamp extension's configuration. Its
// server settings are the Collector's own ([confighttp.ServerConfig],
// squashed, as every HTTP receiver's): endpoint, tls, auth (any
// authenticator extension), max_request_body_size (which also bounds a
// compressed body once inflated, and here every WebSocket message),
// compression_algorithms, cors, read_header_timeout, and the rest.
type Config struct {
	// ServerConfig is the HTTP server's configuration.
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// Path is the URL path of the OpAMP endpoint (WebSocket and plain
	// HTTP); "" means DefaultPath.
	Path string `mapstructure:"path"`
	// MaxAgents is the most agents remembered (instance UIDs, over every
	// transport) and the most WebSocket connections open at once; >= 1.
	// A connection carries one agent: an instance UID it sends after
	// another replaces it.
	MaxAgents int `mapstructure:"max_agents"`
	// SendTimeout bounds each push to one agent; > 0.
	SendTimeout time.Duration `mapstructure:"send_timeout"`

	// Prevents unkeyed literal initialization.
	_ struct{}
}

// ErrInvalidConfig is matched (errors.Is) by every [*ConfigError].
var ErrInvalidConfig = errors.New("deadlinebudget_opamp: invalid config")

// ConfigError names a field of [Config] that is not valid (by its
// configuration key), the value given and what is allowed. It matches
// [ErrInvalidConfig]; Err is the underlying error, if any.
type ConfigError struct {
	Field   string
	Value   any
	Allowed string
	Err     error
}

func (e *ConfigError) Error() string {
	s := fmt.Sprintf("%s: %v: want %s", e.Field, e.Value, e.Allowed)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks the extension's own fields and the endpoint, and
// returns every error found (errors.Join of [*ConfigError]s), each naming
// its key. The Collector validates the nested server settings (tls, auth,
// …) itself, each with its path.
func (c *Config) Validate() error {
	var errs []error
	if c.ServerConfig.NetAddr.Transport == "tcp" || c.ServerConfig.NetAddr.Transport == "" {
		if _, _, err := net.SplitHostPort(c.ServerConfig.NetAddr.Endpoint); err != nil {
			errs = append(errs, &ConfigError{Field: "endpoint", Value: fmt.Sprintf("%q", c.ServerConfig.NetAddr.Endpoint), Allowed: "host:port, e.g. localhost:4320", Err: err})
		}
	}
	if c.Path != "" && c.Path[0] != '/' {
		errs = append(errs, &ConfigError{Field: "path", Value: fmt.Sprintf("%q", c.Path), Allowed: `a URL path starting with "/", e.g. /v1/opamp`})
	}
	if c.MaxAgents < 1 {
		errs = append(errs, &ConfigError{Field: "max_agents", Value: c.MaxAgents, Allowed: ">= 1"})
	}
	if c.SendTimeout <= 0 {
		errs = append(errs, &ConfigError{Field: "send_timeout", Value: c.SendTimeout, Allowed: "> 0, e.g. 5s"})
	}
	if c.ServerConfig.MaxRequestBodySize < 0 {
		errs = append(errs, &ConfigError{Field: "max_request_body_size", Value: c.ServerConfig.MaxRequestBodySize, Allowed: ">= 0 (0: the default, 1 MiB)"})
	}
	return errors.Join(errs...)
}

func (c *Config) path() string {
	if c.Path == "" {
		return DefaultPath
	}
	return c.Path
}

func (c *Config) maxBody() int64 {
	if c.ServerConfig.MaxRequestBodySize <= 0 {
		return DefaultMaxRequestBodySize
	}
	return c.ServerConfig.MaxRequestBodySize
}
