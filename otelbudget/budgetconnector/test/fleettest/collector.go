// Package fleettest runs a real OpenTelemetry Collector in-process on
// loopback, with the deadlinebudget connector and its OpAMP extension: the
// OTLP/HTTP receiver takes the clients' spans, the connector turns them into
// histograms and suggestions, the otlphttp exporter sends those to a metrics
// server of this package, and the extension serves the ceilings over OpAMP.
// The tests of this module and the fleet demo (examples/fleetdemo) use it.
package fleettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
)

// Options configure the Collector.
type Options struct {
	// ExportInterval is the connector's export_interval.
	ExportInterval time.Duration
	// Connector is more YAML under connectors::deadlinebudget (e.g.
	// "suggest: {quantile: 0.99}"), indented by the caller as a mapping;
	// "" for none.
	Connector string
	// ExportTo, when set, is the OTLP/HTTP base URL the metrics go to
	// instead of the Collector's own metrics server: another Collector's
	// OTLP receiver, whose connector merges them (an agent → gateway
	// tier).
	ExportTo string
}

// Collector is a running Collector and the servers around it.
type Collector struct {
	// OTLP is the OTLP/HTTP receiver's base URL (http://127.0.0.1:port).
	OTLP string
	// OpAMP is the OpAMP endpoint's WebSocket URL.
	OpAMP string
	// Metrics receives what the Collector exports.
	Metrics *MetricsServer

	col  *otelcol.Collector
	done chan error
}

// Factories are the Collector's components: the OTLP receiver, the
// deadlinebudget connector and extension, the otlphttp exporter.
func Factories() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlphttpexporter.NewFactory()); err != nil {
		return f, err
	}
	if f.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](budgetconnector.NewFactory()); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](budgetconnector.NewExtensionFactory()); err != nil {
		return f, err
	}
	return f, nil
}

// Config is the Collector's configuration for the given endpoints.
func Config(otlp, opamp, metricsURL string, o Options) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
extensions:
  deadlinebudget_opamp:
    endpoint: %s
connectors:
  deadlinebudget:
    export_interval: %s
    opamp: deadlinebudget_opamp
%s
exporters:
  otlp_http:
    endpoint: %s
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  extensions: [deadlinebudget_opamp]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [deadlinebudget]
    metrics/fleet:
      receivers: [otlp]
      exporters: [deadlinebudget]
    metrics:
      receivers: [deadlinebudget]
      exporters: [otlp_http]
`, otlp, opamp, o.ExportInterval, indent(o.Connector), metricsURL)
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	out := ""
	for _, line := range splitLines(s) {
		out += "    " + line + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start builds and starts the Collector; it is running when Start
// returns. Stop it with Shutdown.
func Start(ctx context.Context, o Options) (*Collector, error) {
	otlp, err := freeAddr()
	if err != nil {
		return nil, err
	}
	opamp, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ms := newMetricsServer()
	to := ms.URL
	if o.ExportTo != "" {
		to = o.ExportTo
	}
	yaml := Config(otlp, opamp, to, o)
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "fleettest", Description: "deadlinebudget connector on loopback", Version: "test"},
		Factories: Factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:              []string{"yaml:" + yaml},
			ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
		}},
	})
	if err != nil {
		ms.Close()
		return nil, err
	}
	c := &Collector{OTLP: "http://" + otlp, OpAMP: "ws://" + opamp + budgetconnector.DefaultOpAMPPath, Metrics: ms, col: col, done: make(chan error, 1)}
	go func() { c.done <- col.Run(context.WithoutCancel(ctx)) }()
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-c.done:
			ms.Close()
			if err == nil {
				err = errors.New("fleettest: the Collector stopped as it started")
			}
			return nil, err
		case <-ctx.Done():
			c.Shutdown()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return c, nil
}

// Shutdown stops the Collector and the metrics server, and returns the
// Collector's error.
func (c *Collector) Shutdown() error {
	c.col.Shutdown()
	err := <-c.done
	c.Metrics.Close()
	return err
}

// SendTraces posts spans to the Collector's OTLP/HTTP receiver, as an
// OTLP exporter does (protobuf).
func SendTraces(ctx context.Context, client *http.Client, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/traces", bytesReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fleettest: OTLP receiver answered %s: %s", resp.Status, msg)
	}
	return nil
}

// MetricsServer is an OTLP/HTTP metrics endpoint that keeps what it gets.
type MetricsServer struct {
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	batches []pmetric.Metrics
	changed chan struct{}
}

func newMetricsServer() *MetricsServer {
	m := &MetricsServer{changed: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = m.srv.URL
	return m
}

func (m *MetricsServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/metrics" {
		http.Error(w, "want an OTLP metrics export on /v1/metrics", http.StatusBadRequest)
		return
	}
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.batches = append(m.batches, req.Metrics())
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	resp, _ := pmetricotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// Batches returns what was received so far and a channel closed at the
// next export.
func (m *MetricsServer) Batches() ([]pmetric.Metrics, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]pmetric.Metrics(nil), m.batches...), m.changed
}

// Close stops the server.
func (m *MetricsServer) Close() { m.srv.Close() }

// Gauges returns the latest value of gauge name by service and step
// ("service/step"), over the batches.
func Gauges(batches []pmetric.Metrics, name string) map[string]float64 {
	out := map[string]float64{}
	for _, md := range batches {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			svc, _ := rms.At(i).Resource().Attributes().Get("service.name")
			sms := rms.At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					m := ms.At(k)
					if m.Name() != name || m.Type() != pmetric.MetricTypeGauge {
						continue
					}
					dps := m.Gauge().DataPoints()
					for p := range dps.Len() {
						dp := dps.At(p)
						step, _ := dp.Attributes().Get("deadline.step")
						v := dp.DoubleValue()
						if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
							v = float64(dp.IntValue())
						}
						out[svc.AsString()+"/"+step.AsString()] = v
					}
				}
			}
		}
	}
	return out
}
