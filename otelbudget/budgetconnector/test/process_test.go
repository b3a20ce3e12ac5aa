package test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/certtest"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/proctest"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/test/fleettest"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

// docsYAML returns the ```yaml blocks of docs/fleet.md whose first line
// satisfies pick.
func docsYAML(t *testing.T, pick func(first string) bool) []string {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "fleet.md"))
	require.NoError(t, err)
	var out []string
	for _, part := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		require.True(t, ok)
		first, _, _ := strings.Cut(block, "\n")
		if pick(first) {
			out = append(out, block)
		}
	}
	return out
}

func freeLoopback(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// collectorProcess is a Collector binary running as its own process.
type collectorProcess struct {
	cmd    *exec.Cmd
	output lockedBuffer
	done   chan error
}

// lockedBuffer is the process's output, written by exec's copier and read
// by a failing test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ocbVersion is the Collector builder the docs' builder config is for.
const ocbVersion = "v0.165.0"

// ocb returns the Collector builder's binary, installed from the module
// proxy into the repository's .bin (which git ignores) the first time and
// found there afterwards. It is installed under a temporary name and
// renamed, so that two test processes never see half a binary.
func ocb(t *testing.T) string {
	binDir, err := filepath.Abs(filepath.Join("..", "..", "..", ".bin"))
	require.NoError(t, err)
	bin := filepath.Join(binDir, "ocb-"+ocbVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	require.NoError(t, os.MkdirAll(binDir, 0o755))
	tmp, err := os.MkdirTemp(binDir, "ocb-install-")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "go.opentelemetry.io/collector/cmd/builder@"+ocbVersion)
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "GOBIN="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go install the Collector builder: %s", out)
	require.NoError(t, os.Rename(filepath.Join(tmp, "builder"), bin))
	return bin
}

// builderConfig is docs/fleet.md's builder config as written, with only
// what a checkout of this repository needs added: replaces pointing the
// repository's modules at their directories (v0.1.0 is not published from
// a working tree), and an output path in dir. It returns the config and the
// distribution's binary name.
func builderConfig(t *testing.T, dir string) ([]byte, string) {
	blocks := docsYAML(t, func(first string) bool { return first == "# builder-config.yaml (ocb)" })
	require.Len(t, blocks, 1, "docs/fleet.md has one builder config")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(blocks[0]), &cfg))
	require.NotContains(t, cfg, "replaces", "the docs' builder config is a user's: no replaces")
	dist, ok := cfg["dist"].(map[string]any)
	require.True(t, ok, "the docs' builder config names its distribution")
	name, ok := dist["name"].(string)
	require.True(t, ok && name != "", "the docs' builder config names its binary")
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	dist["output_path"] = filepath.Join(dir, "dist")
	cfg["replaces"] = []string{
		"github.com/deadlinebudget/budget => " + root,
		"github.com/deadlinebudget/budget/otelbudget/budgetconnector => " + filepath.Join(root, "otelbudget", "budgetconnector"),
		"github.com/deadlinebudget/budget/otelbudget/budgetopamp => " + filepath.Join(root, "otelbudget", "budgetopamp"),
	}
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return out, name
}

// buildCollector builds the Collector with the builder from docs/fleet.md's
// builder config, as a user builds it, into dir. The Go build cache keeps
// the compiled packages, so a second build is a link.
func buildCollector(t *testing.T, dir string) string {
	builder := ocb(t)
	cfg, name := builderConfig(t, dir)
	path := filepath.Join(dir, "builder-config.yaml")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	out, err := exec.Command(builder, "--config", path).CombinedOutput()
	require.NoError(t, err, "ocb --config builder-config.yaml:\n%s\n%s", cfg, out)
	return filepath.Join(dir, "dist", name)
}

// runCollector runs bin with config (and extra --config sources), with
// OPAMP_TOKEN in its environment; the test's cleanup stops it with
// SIGTERM and checks that it exited cleanly.
func runCollector(t *testing.T, bin, config, token string, extra ...string) *collectorProcess {
	path := filepath.Join(t.TempDir(), "collector.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	args := []string{"--config", "file:" + path}
	for _, e := range extra {
		args = append(args, "--config", e)
	}
	p := &collectorProcess{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), "OPAMP_TOKEN="+token)
	p.cmd.Stdout, p.cmd.Stderr = &p.output, &p.output
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			assert.NoError(t, err, "the Collector exits cleanly on SIGTERM:\n%s", p.output.String())
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			t.Errorf("the Collector did not stop on SIGTERM:\n%s", p.output.String())
		}
	})
	return p
}

// localize points a docs YAML block at loopback: its listen addresses at
// free loopback ports (returned by the docs' address), its certificate
// paths at dir, its exporter at metricsURL. What else it says runs as
// written.
func localize(t *testing.T, yaml, dir, metricsURL string) (string, map[string]string) {
	addrs := map[string]string{}
	for _, a := range []string{"0.0.0.0:4317", "0.0.0.0:4318", "0.0.0.0:4320"} {
		if strings.Contains(yaml, a) {
			addrs[a] = freeLoopback(t)
			yaml = strings.ReplaceAll(yaml, a, addrs[a])
		}
	}
	yaml = strings.ReplaceAll(yaml, "/etc/otelcol/tls/", dir+"/")
	yaml = strings.ReplaceAll(yaml, "https://metrics.example.com", metricsURL)
	require.NotContains(t, yaml, "0.0.0.0", "every listen address is on loopback in the test")
	return yaml, addrs
}

// attemptSpans are n completed attempts of checkout's fetch, log-normal
// around 40 ms.
func attemptSpans(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	end := time.Now()
	for i := range n {
		d := time.Duration(float64(40*time.Millisecond) * math.Exp(0.3*rng.NormFloat64()))
		sp := spans.AppendEmpty()
		sp.SetName("fetch attempt")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-d)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		sp.Attributes().PutStr(string(otelbudget.AttrStep), "fetch")
		sp.Attributes().PutInt(string(otelbudget.AttrAttemptNumber), int64(1+i%2))
		sp.Attributes().PutStr(string(otelbudget.AttrAttemptEndedBy), "completed")
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		panic(err)
	}
	return b
}

// startClient starts budgetopamp's client of checkout over wss with the
// header; the test's cleanup stops it.
func startClient(t *testing.T, opamp string, certs certtest.Certs, header http.Header) (*budgetopamp.Client, *learn.Live) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 2 * time.Second}})
	require.NoError(t, err)
	c, err := budgetopamp.Start(context.Background(), "wss://"+opamp+"/v1/opamp", live, budgetopamp.WithServiceName("checkout"),
		budgetopamp.WithTLS(certs.ClientTLS(t)), budgetopamp.WithHeader(header))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
	return c, live
}

// The docs' YAML for one Collector and for the gateway tier, run as
// processes of the Collector that ocb builds from the docs' builder
// config: each starts as
// written (addresses on loopback, certificates made here); over its
// extension's TLS and bearer auth, a client with the token gets its
// service's ceilings, an anonymous one and one with a wrong token are
// refused.
func TestDocsCollectorsAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Collector binary")
	}
	dir := t.TempDir()
	certs := certtest.New(t)
	certs.Files(t, dir)
	began := time.Now()
	bin := buildCollector(t, dir)
	t.Logf("ocb built the docs' Collector in %v", time.Since(began).Round(time.Millisecond))
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer metrics.Close()
	const token = "s3cret-token"

	one := docsYAML(t, func(first string) bool { return first == "receivers:" })
	require.Len(t, one, 1, "docs/fleet.md has one single-Collector YAML")
	gateway := docsYAML(t, func(first string) bool { return strings.HasPrefix(first, "# gateway Collector") })
	require.Len(t, gateway, 1, "docs/fleet.md has one gateway YAML")

	t.Run("one Collector", func(t *testing.T) {
		yaml, addrs := localize(t, one[0], dir, metrics.URL)
		// The docs' 15 s export interval, shortened for the test by a second
		// config source merged over the docs' (as a user's override would).
		p := runCollector(t, bin, yaml, token, "yaml:connectors::deadlinebudget::export_interval: 200ms")
		otlp, opamp := "http://"+addrs["0.0.0.0:4318"], addrs["0.0.0.0:4320"]
		require.Eventually(t, func() bool {
			return fleettest.SendTraces(context.Background(), http.DefaultClient, otlp, attemptSpans(2000)) == nil
		}, 60*time.Second, 10*time.Millisecond, "the Collector took spans:\n%s", &p.output)

		good, live := startClient(t, opamp, certs, http.Header{"Authorization": {"Bearer " + token}})
		anonymous, _ := startClient(t, opamp, certs, nil)
		wrong, _ := startClient(t, opamp, certs, http.Header{"Authorization": {"Bearer guess"}})
		require.Eventually(t, func() bool { return good.Status().Applied >= 1 }, 30*time.Second, 5*time.Millisecond, "%s", &p.output)
		lc, ok := live.Ceiling("fetch")
		require.True(t, ok)
		t.Logf("the authenticated client applied fetch's ceiling %v from a Collector process", lc.Ceiling)
		assert.Greater(t, lc.Ceiling, 40*time.Millisecond)
		for name, c := range map[string]*budgetopamp.Client{"anonymous": anonymous, "wrong token": wrong} {
			require.Eventually(t, func() bool { return c.Status().ConnectError != nil }, 30*time.Second, 5*time.Millisecond, name)
			assert.False(t, c.Status().Connected, name)
			assert.Zero(t, c.Status().Applied, name)
		}
		// 255 KiB of gzip (247 MiB inflated) to the extension, with the
		// token and without: the Collector's peak RSS.
		member := proctest.GzipZeros(t, 1<<20)
		bomb := bytes.Repeat(member, (255<<10)/len(member))
		tr := &http.Transport{TLSClientConfig: certs.ClientTLS(t)}
		defer tr.CloseIdleConnections()
		before := proctest.PeakRSS(t, p.cmd.Process.Pid)
		for name, hdr := range map[string]string{"with the token": "Bearer " + token, "anonymous": ""} {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://"+opamp+"/v1/opamp", bytes.NewReader(bomb))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Content-Encoding", "gzip")
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Contains(t, []int{http.StatusBadRequest, http.StatusUnauthorized}, resp.StatusCode, name)
			t.Logf("%d-byte gzip POST %s: %s", len(bomb), name, resp.Status)
		}
		after := proctest.PeakRSS(t, p.cmd.Process.Pid)
		t.Logf("the Collector's peak RSS: %d MiB -> %d MiB (+%.1f MiB)", before>>20, after>>20, float64(after-before)/(1<<20))
		assert.LessOrEqual(t, after-before, int64(64<<20))

		// Plain ws:// to the TLS endpoint is no way in either.
		resp, err := http.Get("http://" + opamp + "/v1/opamp")
		if err == nil {
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			_ = resp.Body.Close()
		}
	})

	t.Run("gateway", func(t *testing.T) {
		yaml, addrs := localize(t, gateway[0], dir, metrics.URL)
		p := runCollector(t, bin, yaml, token)
		opamp := addrs["0.0.0.0:4320"]
		good, _ := startClient(t, opamp, certs, http.Header{"Authorization": {"Bearer " + token}})
		anonymous, _ := startClient(t, opamp, certs, nil)
		require.Eventually(t, func() bool { return good.Status().Connected }, 60*time.Second, 5*time.Millisecond, "%s", &p.output)
		require.Eventually(t, func() bool { return anonymous.Status().ConnectError != nil }, 30*time.Second, 5*time.Millisecond)
		assert.False(t, anonymous.Status().Connected)
	})
}
