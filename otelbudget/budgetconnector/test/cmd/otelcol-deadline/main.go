// Command otelcol-deadline is a Collector distribution as the Collector
// builder (ocb) generates one from docs/fleet.md's builder config: the
// otlp receiver, the otlp_http exporter, the deadlinebudget connector, the
// deadlinebudget_opamp extension and contrib's bearertokenauth extension,
// behind otelcol.NewCommand. The process test (../../process_test.go)
// builds it and runs it with the YAML of docs/fleet.md.
//
//	OPAMP_TOKEN=... otelcol-deadline --config file:collector.yaml
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension"
)

func main() {
	if err := otelcol.NewCommand(settings()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol-deadline:", err)
		os.Exit(1)
	}
}

// settings are the builder's generated ones: the name, the components,
// the config sources (file:, yaml:, and ${env:VAR} inside them).
func settings() otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-deadline", Description: "Collector with the deadlinebudget components", Version: "test"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory(), yamlprovider.NewFactory()},
			DefaultScheme:     "env",
		}},
	}
}

func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlphttpexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](budgetconnector.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](opampextension.NewFactory(), bearertokenauthextension.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	return f, nil
}
