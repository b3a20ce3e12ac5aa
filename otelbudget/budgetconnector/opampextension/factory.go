// Package opampextension is the deadlinebudget_opamp extension: an OpAMP
// server that serves each connected agent the fleet's ceilings for its
// service.name as remote configuration (docs/fleet.md), fed by a
// deadlinebudget connector whose `opamp` setting names it. Its server is
// the Collector's own ([confighttp.ServerConfig]): TLS, auth with any
// authenticator extension, body and decompression limits.
//
// In a Collector builder (ocb) configuration:
//
//	extensions:
//	  - gomod: github.com/deadlinebudget/budget/otelbudget/budgetconnector v0.1.0
//	    import: github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension
package opampextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension/internal/metadata"
)

// Type names the extension in a Collector's configuration.
const Type = "deadlinebudget_opamp"

// Stability is the extension's stability.
const Stability = metadata.ExtensionStability

// NewFactory returns the deadlinebudget_opamp extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = DefaultEndpoint
	srv.MaxRequestBodySize = DefaultMaxRequestBodySize
	return &Config{ServerConfig: srv, Path: DefaultPath, MaxAgents: DefaultMaxAgents, SendTimeout: DefaultSendTimeout}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newExtension(set, cfg.(*Config))
}
