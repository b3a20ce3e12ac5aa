package otlpcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/deadlinebudget/budget/otelbudget"
)

// buildCollector builds the Collector of ./collector (its own module: the
// otlp receiver and the file exporter) once per test binary, into a
// directory that outlives the tests that use it; it returns the binary,
// how long the build took, and the build's error.
var buildCollector = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "otlpcheck-collector")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "collector")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = "collector"
	start := time.Now()
	out, err := cmd.CombinedOutput()
	collectorBuildTime = time.Since(start)
	if err != nil {
		return "", errors.New("go build ./collector: " + err.Error() + ": " + string(out))
	}
	return bin, nil
})

// collectorBuildTime is how long buildCollector's go build took.
var collectorBuildTime time.Duration

// collectorLog keeps what the Collector writes on stderr and reports, once,
// the address its OTLP/HTTP receiver listens on (from its "Starting HTTP
// server" line: the config asks for port 0).
type collectorLog struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	scanned  int
	endpoint chan string // receives the address once, then nothing
	found    bool
}

var httpServerLine = regexp.MustCompile(`Starting HTTP server.*"endpoint": "([^"]+)"`)

func (l *collectorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for !l.found {
		rest := l.buf.Bytes()[l.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		l.scanned += i + 1
		if m := httpServerLine.FindSubmatch(rest[:i]); m != nil {
			l.found = true
			l.endpoint <- string(m[1])
		}
	}
	return len(p), nil
}

func (l *collectorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// collector is a running Collector.
type collector struct {
	cmd      *exec.Cmd
	log      *collectorLog
	exited   chan error // receives Wait's result once
	endpoint string     // http://host:port of its OTLP/HTTP receiver
}

// startCollector runs bin with collector/collector.yaml, its receiver on a
// free loopback port and its file exporter writing to file, and waits (at
// most a minute) until the receiver listens. The test's cleanup kills it if
// the test has not stopped it.
func startCollector(t *testing.T, bin, file string) *collector {
	t.Helper()
	config, err := filepath.Abs(filepath.Join("collector", "collector.yaml"))
	require.NoError(t, err)
	c := &collector{
		cmd:    exec.Command(bin, "--config", "file:"+config),
		log:    &collectorLog{endpoint: make(chan string, 1)},
		exited: make(chan error, 1),
	}
	c.cmd.Env = append(os.Environ(), "OTLPCHECK_ENDPOINT=127.0.0.1:0", "OTLPCHECK_FILE="+file)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	require.NoError(t, c.cmd.Start())
	go func() { c.exited <- c.cmd.Wait() }()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
		}
		<-c.exited
	})
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case addr := <-c.log.endpoint:
		c.endpoint = "http://" + addr
	case err := <-c.exited:
		c.exited <- err
		require.Failf(t, "the Collector exited before listening", "%v:\n%s", err, c.log)
	case <-timer.C:
		require.Failf(t, "the Collector did not listen within a minute", "log:\n%s", c.log)
	}
	return c
}

// stop ends the Collector gracefully (SIGTERM: its receiver stops, then its
// exporters shut down, the file exporter flushing and closing the file) and
// waits at most a minute for it to exit.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case err := <-c.exited:
		c.exited <- err
		require.NoError(t, err, "the Collector's exit, log:\n%s", c.log)
	case <-timer.C:
		require.Failf(t, "the Collector did not stop within a minute of SIGTERM", "log:\n%s", c.log)
	}
}

// learnedRow matches a step's row of the demo's "Learned with the ceilings
// opened to the budget" table: its sample count is the attempts that the
// demo recorded, and exported, for that step.
var learnedRow = regexp.MustCompile(`(?m)^  (\w+) +\S+ +\S+ +(\d+) \d{4}-`)

// learnedSamples returns the per-step sample counts of the demo's learning
// phase, the one it exports.
func learnedSamples(t *testing.T, stdout string) map[string]uint64 {
	t.Helper()
	_, table, ok := bytes.Cut([]byte(stdout), []byte("Learned with the ceilings opened to the budget"))
	require.True(t, ok, "the demo prints what it learned:\n%s", stdout)
	out := map[string]uint64{}
	for _, m := range learnedRow.FindAllStringSubmatch(string(table), -1) {
		n, err := strconv.ParseUint(m[2], 10, 64)
		require.NoError(t, err)
		out[m[1]] = n
	}
	return out
}

// fileAttemptCounts reads a file exporter's OTLP JSON lines and sums, per
// service.name and step, the attempts in the deadline.attempt.duration
// exponential histograms (canceled and panicked attempts left out, as learn
// leaves them out). Of a cumulative stream only its latest point counts, as
// budgetadvise counts it.
func fileAttemptCounts(t *testing.T, file string) map[string]map[string]uint64 {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	type stream struct{ service, step, endedBy string }
	latest := map[stream]pmetric.ExponentialHistogramDataPoint{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(sc.Bytes())
		if err != nil || md.ResourceMetrics().Len() == 0 {
			continue // a trace line
		}
		for _, rm := range md.ResourceMetrics().All() {
			svc, _ := rm.Resource().Attributes().Get("service.name")
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != otelbudget.MetricAttemptDuration || m.Type() != pmetric.MetricTypeExponentialHistogram {
						continue
					}
					for _, dp := range m.ExponentialHistogram().DataPoints().All() {
						step, _ := dp.Attributes().Get(string(otelbudget.AttrStep))
						ended, _ := dp.Attributes().Get(string(otelbudget.AttrAttemptEndedBy))
						k := stream{svc.Str(), step.Str(), ended.Str()}
						if prev, ok := latest[k]; !ok || dp.Timestamp() >= prev.Timestamp() {
							latest[k] = dp
						}
					}
				}
			}
		}
	}
	require.NoError(t, sc.Err())
	out := map[string]map[string]uint64{}
	for k, dp := range latest {
		switch k.endedBy {
		case "completed", "error", "attempt_timeout", "deadline":
			if out[k.service] == nil {
				out[k.service] = map[string]uint64{}
			}
			out[k.service][k.step] += dp.Count()
		}
	}
	return out
}

// TestFleetMerge: two demo processes (tracedemo -runs) export their spans
// and exponential attempt-duration histograms to one real OpenTelemetry
// Collector (./collector: otlp receiver, file exporter); budgetadvise reads
// the Collector's file, and its per-step attempt counts, from the metrics
// and from the spans, equal the sum of both processes' counts.
func TestFleetMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Collector and budgetadvise, runs the demo twice with -runs")
	}
	bin, err := buildCollector()
	require.NoError(t, err)
	t.Logf("go build ./collector took %v", collectorBuildTime.Round(time.Millisecond))
	dir := t.TempDir()
	advise := filepath.Join(dir, "budgetadvise")
	build := exec.Command("go", "build", "-o", advise, ".")
	build.Dir = filepath.Join("..", "..", "..", "otelbudget", "cmd", "budgetadvise")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build budgetadvise: %s", out)

	file := filepath.Join(dir, "otlp.jsonl")
	col := startCollector(t, bin, file)
	services := []string{"fleet-a", "fleet-b"}
	perProcess := map[string]map[string]uint64{}
	stderrOf := map[string]string{}
	for _, service := range services {
		env := otlpEnv("http/protobuf", col.endpoint, service)
		env["OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"] = "base2_exponential_bucket_histogram"
		// The export happens once, at exit, within -export-timeout: the
		// default 500ms is short for a loaded machine. The scenario runs
		// are left out: the learning runs' counts, which the demo prints,
		// are what both processes' exports must add up to.
		r := runDemo(t, demoBin, env, "-runs", "20", "-parallel", "20", "-scenario-runs=false", "-export-timeout", "30s")
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
		perProcess[service] = learnedSamples(t, r.stdout)
		stderrOf[service] = r.stderr
		require.NotZero(t, perProcess[service]["fetch"], "%s recorded fetch attempts:\n%s\nstderr:\n%s", service, r.stdout, r.stderr)
	}
	col.stop(t)

	// Both processes' metrics are in the Collector's file, each as its
	// process counted them.
	inFile := fileAttemptCounts(t, file)
	for _, service := range services {
		assert.Equal(t, perProcess[service], inFile[service], "%s: the attempts in the Collector's file; the demo's stderr:\n%s", service, stderrOf[service])
	}

	cmd := exec.Command(advise, "-format", "json", "-min-samples", "10", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "budgetadvise: %s", stderr.String())
	var rep struct {
		Steps []struct {
			Step     string `json:"step"`
			Source   string `json:"source"`
			Attempts uint64 `json:"attempts"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	text, err := exec.Command(advise, "-min-samples", "10", file).Output()
	require.NoError(t, err)
	t.Logf("budgetadvise on the Collector's file:\n%s", text)
	got := map[string]map[string]uint64{"traces": {}, "metrics": {}}
	for _, st := range rep.Steps {
		got[st.Source][st.Step] = st.Attempts
	}
	for _, step := range []string{"search", "fetch", "extract"} {
		sum := perProcess["fleet-a"][step] + perProcess["fleet-b"][step]
		assert.Equal(t, sum, got["metrics"][step], "%s: the merged histogram counts both processes' attempts", step)
		assert.Equal(t, sum, got["traces"][step], "%s: as many attempt spans", step)
	}
}
