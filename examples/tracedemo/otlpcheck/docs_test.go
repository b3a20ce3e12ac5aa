package otlpcheck

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// documented is what docs/attributes.md promises: every deadline.* key
// with its type (string, int, bool), every deadline.* metric with its
// instrument and the attribute keys it carries, and the error.type values.
type documented struct {
	keys       map[string]string   // key -> "string" | "int" | "bool"
	metrics    map[string][]string // name -> attribute keys
	errorTypes map[string]bool
	statusLo   int
	statusHi   int
}

var tick = regexp.MustCompile("`([^`]+)`")

// readDocs parses the tables of docs/attributes.md: a row whose first cell
// is a backquoted deadline.* name is a span attribute (third cell: its
// type) or, in a table whose third column is "instrument", a metric (fifth
// cell: its attributes); the "Values of error.type" table lists the
// error.type values.
func readDocs(t *testing.T) documented {
	t.Helper()
	raw, err := os.ReadFile("../../../docs/attributes.md")
	require.NoError(t, err)
	doc := documented{keys: map[string]string{}, metrics: map[string][]string{}, errorTypes: map[string]bool{}}
	var header []string
	inErrorTypes := false
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			inErrorTypes = strings.Contains(line, "Values of `error.type`")
			continue
		}
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		if inErrorTypes {
			var nums []int
			for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
				if n, err := strconv.Atoi(m[1]); err == nil {
					nums = append(nums, n)
					continue
				}
				doc.errorTypes[m[1]] = true
			}
			if len(nums) == 2 {
				doc.statusLo, doc.statusHi = nums[0], nums[1]
			}
			continue
		}
		m := tick.FindStringSubmatch(cells[0])
		if m == nil || !strings.HasPrefix(m[1], "deadline.") || len(cells) < 5 {
			continue
		}
		switch header[2] {
		case "instrument":
			var attrs []string
			for _, a := range tick.FindAllStringSubmatch(cells[4], -1) {
				attrs = append(attrs, a[1])
			}
			doc.metrics[m[1]] = attrs
		case "type":
			doc.keys[m[1]] = cells[2]
		}
	}
	require.NotEmpty(t, doc.keys, "docs/attributes.md documents span attributes")
	require.NotEmpty(t, doc.metrics, "docs/attributes.md documents metrics")
	require.NotEmpty(t, doc.errorTypes, "docs/attributes.md documents the error.type values")
	return doc
}

// typeName names a pdata value's type as docs/attributes.md does.
func typeName(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return "string"
	case pcommon.ValueTypeInt:
		return "int"
	case pcommon.ValueTypeBool:
		return "bool"
	case pcommon.ValueTypeDouble:
		return "double"
	case pcommon.ValueTypeSlice:
		// An array is documented by its elements' type: "string[]".
		if s := v.Slice(); s.Len() > 0 {
			return typeName(s.At(0)) + "[]"
		}
	}
	return v.Type().String()
}

// TestDocsMatchCollector runs every scenario of the demo against a real
// OTLP receiver and compares what the Collector side decodes with
// docs/attributes.md: every deadline.* attribute that arrives on a span or
// a span event is documented with the type it arrives with; every
// deadline.* metric that arrives is documented, and carries the attributes
// the doc lists for it; every error.type value is in the documented set;
// and every documented key and metric arrives in at least one scenario,
// except those only other compositions set (listed here, with why).
func TestDocsMatchCollector(t *testing.T) {
	doc := readDocs(t)
	// Documented, but no scenario of the demo sets them.
	notInDemo := map[string]string{
		"deadline.server.header_malformed":        "the demo's client always sends a valid header",
		"deadline.server.header_stripped":         "the demo's providers do not strip the header",
		"deadline.server.context_remaining_ms":    "the demo's providers have no outer deadline",
		"deadline.server.refused":                 "the demo's clients refuse locally before a provider would",
		"deadline.server.refusal":                 "the demo's clients refuse locally before a provider would",
		"deadline.server.refusals":                "the providers' meter is a no-op in the demo",
		"deadline.server.clamps":                  "the providers' meter is a no-op in the demo",
		"deadline.server.budget":                  "the providers' meter is a no-op in the demo",
		"deadline.attempt.ceiling_quantile":       "the demo's policies have static ceilings, not learned ones",
		"deadline.retry_budget.denied":            "the demo's policies have no retry budget (issue 12)",
		"deadline.retry_budget.balance":           "the demo's policies have no retry budget (issue 12)",
		"deadline.retry_budget.denials":           "the demo's policies have no retry budget (issue 12)",
		"deadline.hedges":                         "the demo's policies do not hedge (issue 12)",
		"deadline.attempt.hedge":                  "the demo's policies do not hedge (issue 12)",
		"deadline.attempt.hedge_winner":           "the demo's policies do not hedge (issue 12)",
		"deadline.queue.time_ms":                  "the demo has no queue: budgetprop.Consume sets it (otelbudget/test, budgetnats)",
		"deadline.queue.skew_exceeded":            "the demo has no queue: budgetprop.Consume sets it (otelbudget/test, budgetnats)",
		"deadline.attempt.completion_probability": "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.attempt.completion_samples":     "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.attempt.probe":                  "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.refused.completion_probability": "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.refused.completion_samples":     "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.refused.lease_ms":               "the demo's policies have no learned floor: otelbudget/test's learnedfloor_test sets it",
		"deadline.server.completion_probability":  "the demo's providers have no learned admission: otelbudget/test/otelbudgethttp's and otelbudgetgrpc's admission tests set it",
		"deadline.server.completion_samples":      "the demo's providers have no learned admission: otelbudget/test/otelbudgethttp's and otelbudgetgrpc's admission tests set it",
		"deadline.server.probe":                   "the demo's providers have no learned admission: otelbudget/test/otelbudgethttp's and otelbudgetgrpc's admission tests set it",
		"deadline.server.queue_wait_ms":           "the demo's providers have no admission queue: otelbudget/test/otelbudgethttp's and otelbudgetgrpc's admission tests set it",
		"deadline.tool.abandoned":                 "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.agent.final_call":               "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.run.abandoned_tools":            "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.limiter.limit":                  "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.limiter.in_flight":              "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.limiter.queued":                 "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.breaker.state":                  "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.throttle.drop_probability":      "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.breaker.transitions":            "the demo's policies have no overload.Limiter or Throttle: otelbudget/test's TestOverloadGauges exports it",
		"deadline.run.final_answer":               "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.run.model_calls":                "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.reserve_ms":                     "the demo runs no agent: the agents' TestShape (otelbudgeteino/test, otelbudgetgenkit/test) sets it",
		"deadline.run.tool_late_panics":           "the demo runs no agent: agentrun sets it when an abandoned tool panicked before its run ended",
		"deadline.agent.tool_late_panics":         "the demo runs no agent: otelbudgeteino/test's TestToolPanicChild counts one",
		"deadline.limit.cause":                    "the demo's policies have no concurrency limiter (Policy.Limiter): otelbudget/test's limiter_test sets it",
		"deadline.limit.limit":                    "the demo's policies have no concurrency limiter (Policy.Limiter): otelbudget/test's limiter_test sets it",
		"deadline.limit.queue_position":           "the demo's policies have no concurrency limiter (Policy.Limiter): otelbudget/test's limiter_test sets it",
		"deadline.limit.waited_ms":                "the demo's policies have no concurrency limiter (Policy.Limiter): otelbudget/test's limiter_test sets it",
		"deadline.limit.refusals":                 "the demo's policies have no concurrency limiter (Policy.Limiter): otelbudget/test's limiter_test sets it",
	}
	seenKeys := map[string]bool{}
	seenMetrics := map[string]bool{}
	// The gRPC transport's keys (otelgrpc's spans composed with
	// otelbudgetgrpc) are checked against the same document.
	for _, sc := range []struct{ name, budget, transport string }{
		{"ok", "1s", "http"}, {"tight", "110ms", "http"}, {"slow", "1s", "http"}, {"ratelimited", "3s", "http"}, {"flaky", "1s", "http"}, {"refused", "10ms", "http"},
		{"ok", "1s", "grpc"}, {"ratelimited", "3s", "grpc"},
	} {
		name := sc.name
		if sc.transport != "http" {
			name += "/" + sc.transport
		}
		t.Run(name, func(t *testing.T) {
			s := &sink{}
			endpoint := httpReceiver(t, s)
			r := runDemo(t, demoBin, otlpEnv("http/protobuf", endpoint, "otlpcheck"), "-scenario", sc.name, "-budget", sc.budget, "-transport", sc.transport)
			require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
			nSpans, nPoints := exported(t, r.stderr, "otlp http/protobuf")
			require.Len(t, s.spans(), nSpans, "every span arrived")
			require.Equal(t, nPoints, s.dataPoints(), "every metric point arrived")

			checkAttrs := func(where string, attrs pcommon.Map) {
				for k, v := range attrs.All() {
					if k == "error.type" {
						et := v.AsString()
						if n, err := strconv.Atoi(et); err == nil {
							assert.True(t, n >= doc.statusLo && n <= doc.statusHi, "%s: error.type %s is a documented status code", where, et)
						} else {
							assert.True(t, doc.errorTypes[et], "%s: error.type %q is documented", where, et)
						}
						continue
					}
					if !strings.HasPrefix(k, "deadline.") {
						continue
					}
					seenKeys[k] = true
					typ, ok := doc.keys[k]
					if assert.True(t, ok, "%s: %s is documented", where, k) {
						assert.Equal(t, typ, typeName(v), "%s: %s has the documented type", where, k)
					}
				}
			}
			for _, rs := range s.spans() {
				checkAttrs("span "+rs.span.Name(), rs.span.Attributes())
				for _, ev := range rs.span.Events().All() {
					checkAttrs("event "+ev.Name()+" of "+rs.span.Name(), ev.Attributes())
				}
			}
			for name, ms := range s.metricsByName() {
				if !strings.HasPrefix(name, "deadline.") {
					continue
				}
				seenMetrics[name] = true
				want, ok := doc.metrics[name]
				if !assert.True(t, ok, "metric %s is documented", name) {
					continue
				}
				for _, m := range ms {
					for _, attrs := range pointAttributes(m.m) {
						var got []string
						for k := range attrs.All() {
							got = append(got, k)
						}
						slices.Sort(got)
						assert.Equal(t, sorted(want), got, "metric %s carries the documented attributes", name)
					}
				}
			}
		})
	}
	for k := range doc.keys {
		if _, skip := notInDemo[k]; !skip {
			assert.True(t, seenKeys[k], "documented %s arrived in some scenario", k)
		}
	}
	for name := range doc.metrics {
		if _, skip := notInDemo[name]; !skip {
			assert.True(t, seenMetrics[name], "documented metric %s arrived in some scenario", name)
		}
	}
	for k := range notInDemo {
		_, isKey := doc.keys[k]
		_, isMetric := doc.metrics[k]
		assert.True(t, isKey || isMetric, "%s, excused above, is documented", k)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// pointAttributes returns the attributes of every data point of m.
func pointAttributes(m pmetric.Metric) []pcommon.Map {
	var out []pcommon.Map
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			out = append(out, dp.Attributes())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			out = append(out, dp.Attributes())
		}
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			out = append(out, dp.Attributes())
		}
	case pmetric.MetricTypeGauge:
		for _, dp := range m.Gauge().DataPoints().All() {
			out = append(out, dp.Attributes())
		}
	}
	return out
}
