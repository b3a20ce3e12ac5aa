// Command collector is a minimal OpenTelemetry Collector: the otlp
// receiver and the file exporter, built from their components the way the
// Collector builder's generated main does (otelcol.NewCommand with
// factories). otlpcheck's TestFleetMerge builds and runs it with collector.yaml.
//
// Usage (collector.yaml reads the receiver's address and the file's path
// from the environment; further --config sources are merged over it):
//
//	OTLPCHECK_ENDPOINT=127.0.0.1:4318 OTLPCHECK_FILE=otlp.jsonl \
//	    collector --config file:collector.yaml
//	collector validate --config file:collector.yaml --config 'yaml:exporters::file::path: otlp.jsonl'
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	if err := otelcol.NewCommand(settings()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "collector:", err)
		os.Exit(1)
	}
}

// settings are the collector's: its name, its components, and the config
// sources it accepts (file: and yaml: URIs, and ${env:VAR} inside them,
// ${VAR} meaning the same, as in the builder's generated main).
func settings() otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "collector",
			Description: "OTLP receiver and file exporter, for otlpcheck",
			Version:     "test",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	}
}

// components lists the factories: the otlp receiver, the file exporter and
// the Collector's own telemetry (which the config turns off).
func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	return f, nil
}
