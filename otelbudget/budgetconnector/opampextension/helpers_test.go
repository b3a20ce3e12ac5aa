package opampextension

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/certtest"
)

// host is a component.Host with the given extensions.
type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

func testConfig() *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	return cfg
}

// start creates and starts the extension on h; the test's cleanup shuts
// it down.
func start(t *testing.T, cfg *Config, h host) *extensionImpl {
	t.Helper()
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	if h == nil {
		h = host{}
	}
	require.NoError(t, ext.Start(context.Background(), h))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*extensionImpl)
}

var bearerID = component.MustNewIDWithName("bearertokenauth", "agents")

// secured returns the extension's config with TLS (certificates made for
// the test) and bearer-token auth, and the host with the authenticator.
func secured(t *testing.T, token string) (*Config, host, certtest.Certs) {
	t.Helper()
	certs := certtest.New(t)
	cfg := testConfig()
	cfg.ServerConfig.TLS = configoptional.Some(configtls.ServerConfig{Config: configtls.Config{
		CertPem: configopaque.String(certs.CertPEM), KeyPem: configopaque.String(certs.KeyPEM)}})
	cfg.ServerConfig.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: bearerID}})

	bf := bearertokenauthextension.NewFactory()
	bcfg := bf.CreateDefaultConfig().(*bearertokenauthextension.Config)
	bcfg.BearerToken = configopaque.String(token)
	auth, err := bf.Create(context.Background(), extensiontest.NewNopSettings(bf.Type()), bcfg)
	require.NoError(t, err)
	require.NoError(t, auth.Start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, auth.Shutdown(context.Background())) })
	return cfg, host{bearerID: auth}, certs
}

func extensiontestSettings() extension.Settings {
	return extensiontest.NewNopSettings(NewFactory().Type())
}
