package budgetopamp_test

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
)

var t0 = time.Unix(1_700_000_000, 0)

// body is a contract body for service with the steps' ceilings (ms).
func body(t testing.TB, service string, ceilings map[string]float64) []byte {
	c := budgetopamp.Ceilings{Service: service, ComputedAt: time.Now(), WindowStart: t0, WindowEnd: t0.Add(time.Minute), Steps: map[string]budgetopamp.StepCeiling{}}
	for step, ms := range ceilings {
		c.Steps[step] = budgetopamp.StepCeiling{CeilingMS: ms, EstimateMS: ms / 1.2, Quantile: 0.99, Margin: 1.2, Samples: 5000, Censored: 12}
	}
	b, err := c.MarshalJSON()
	require.NoError(t, err)
	return b
}

// newLive is a recorder's live ceiling: p99 × 1.2 in [1ms, max], from 100
// samples.
func newLive(t testing.TB, max time.Duration) (*learn.Recorder, *learn.Live) {
	rec := new(learn.Recorder)
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Min: time.Millisecond, Max: max, MinSamples: 100}, Every: 10})
	require.NoError(t, err)
	return rec, live
}

// start starts a client of service on f, stopped (and checked stopped) at
// the test's end.
func start(t testing.TB, f *fleetServer, sink budgetopamp.Sink, opts ...budgetopamp.Option) *budgetopamp.Client {
	c, err := budgetopamp.Start(context.Background(), f.endpoint(), sink, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
		require.NoError(t, c.Stop(ctx), "a second Stop returns the first's result")
		assert.False(t, c.Status().Connected)
	})
	return c
}

// waitCeiling waits (real time, 20 s at most) until live serves want for
// step, and returns how long that took from since.
func waitCeiling(t testing.TB, live *learn.Live, step string, want time.Duration, since time.Time) time.Duration {
	t.Helper()
	limit := time.Now().Add(20 * time.Second)
	for {
		if c, ok := live.Ceiling(step); ok && c.Ceiling == want {
			return time.Since(since)
		}
		if time.Now().After(limit) {
			c, ok := live.Ceiling(step)
			t.Fatalf("step %q: ceiling %v (%v), want %v", step, c, ok, want)
		}
		runtime.Gosched()
	}
}

// A fresh client identifies itself, applies the fleet's ceilings pushed to
// it (APPLIED, with the hash), serves them at once, with their quantile;
// the process's own samples then refine them.
func TestClientAppliesFleetCeilingsThenLocalSamplesRefineThem(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	rec, live := newLive(t, time.Second)
	c := start(t, f, live, budgetopamp.WithServiceName("checkout"), budgetopamp.WithInstanceID("replica-7"))

	a := f.agent("checkout")
	assert.Equal(t, "replica-7", a.instance)
	assert.Len(t, a.uid, 16)
	want := uint64(protobufs.AgentCapabilities_AgentCapabilities_AcceptsRemoteConfig | protobufs.AgentCapabilities_AgentCapabilities_ReportsRemoteConfig)
	assert.Equal(t, want, a.caps&want, "AcceptsRemoteConfig and ReportsRemoteConfig")
	require.Eventually(t, func() bool { return c.Status().Connected }, 20*time.Second, time.Millisecond)
	_, ok := live.Ceiling("fetch")
	require.False(t, ok, "cold: nothing yet")

	rc := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 123.4, "search": 30}), budgetopamp.ContentType)
	pushed := f.push("checkout", rc)
	took := waitCeiling(t, live, "fetch", 123400*time.Microsecond, pushed)
	t.Logf("pickup: %v from the server's push to Ceiling returning the fleet's ceiling (real time, loopback)", took)
	lc, _ := live.Ceiling("fetch")
	assert.Equal(t, 0.99, lc.Quantile)

	st := f.status(rc.ConfigHash)
	assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED, st.Status)
	assert.Empty(t, st.ErrorMessage)
	s := c.Status()
	assert.Equal(t, 1, s.Applied)
	assert.Equal(t, rc.ConfigHash, s.Hash)
	assert.Equal(t, 123.4, s.Ceilings.Steps["fetch"].CeilingMS)
	assert.False(t, s.AppliedAt.IsZero())
	p, ok := live.Prior("search")
	require.True(t, ok)
	assert.Equal(t, learn.Prior{Ceiling: 30 * time.Millisecond, Quantile: 0.99, Samples: 5000, First: t0.UTC(), Last: t0.Add(time.Minute).UTC()}, p)

	for range 100 { // the process's own samples: 10ms, p99 × 1.2 = 12ms
		rec.Record("fetch", deadline.EndedCompleted, 10*time.Millisecond, t0)
	}
	lc, _ = live.Ceiling("fetch")
	assert.InEpsilon(t, 12*time.Millisecond, lc.Ceiling, 0.02, "its own samples took over")
	lc, _ = live.Ceiling("search")
	assert.Equal(t, 30*time.Millisecond, lc.Ceiling, "search still cold: the fleet's")
}

// FirstApplied is closed once the first body is applied, and only then: a
// refused body leaves it open; when it closes the sink already serves the
// ceilings and Status counts the body.
func TestClientFirstApplied(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	_, live := newLive(t, time.Second)
	c := start(t, f, live, budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	bad := remoteConfig(body(t, "billing", map[string]float64{"fetch": 10}), budgetopamp.ContentType)
	f.push("checkout", bad)
	require.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED, f.status(bad.ConfigHash).Status)
	select {
	case <-c.FirstApplied():
		t.Fatal("closed by a refused body")
	default:
	}

	f.push("checkout", remoteConfig(body(t, "checkout", map[string]float64{"fetch": 90}), budgetopamp.ContentType))
	select {
	case <-c.FirstApplied():
	case <-time.After(20 * time.Second):
		t.Fatal("not closed 20s after the push")
	}
	lc, ok := live.Ceiling("fetch")
	require.True(t, ok, "the sink has the ceilings when it closes")
	assert.Equal(t, 90*time.Millisecond, lc.Ceiling)
	assert.Equal(t, 1, c.Status().Applied)
	assert.Equal(t, 1, c.Status().Refused)
}

// A client that connects to a server which already has the service's
// ceilings gets them in answer to its first message.
func TestClientStartedFreshGetsTheCeilingsOnConnect(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	rc := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 80}), budgetopamp.ContentType)
	f.push("checkout", rc)
	_, live := newLive(t, time.Second)
	started := time.Now()
	start(t, f, live, budgetopamp.WithServiceName("checkout"))
	took := waitCeiling(t, live, "fetch", 80*time.Millisecond, started)
	t.Logf("cold start: %v from Start to Ceiling returning the fleet's ceiling (real time, loopback, connection included)", took)
	assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED, f.status(rc.ConfigHash).Status)

	// Another service's client does not get them: it gets its own.
	_, other := newLive(t, time.Second)
	start(t, f, other, budgetopamp.WithServiceName("billing"))
	f.agent("billing")
	waitCeiling(t, other, "charge", 40*time.Millisecond, f.push("billing", remoteConfig(body(t, "billing", map[string]float64{"charge": 40}), budgetopamp.ContentType)))
	_, ok := other.Ceiling("fetch")
	assert.False(t, ok, "checkout's ceilings are not billing's")
	lc, _ := live.Ceiling("fetch")
	assert.Equal(t, 80*time.Millisecond, lc.Ceiling, "nor billing's checkout's")
	_, ok = live.Ceiling("charge")
	assert.False(t, ok)
}

// The server dies: the client keeps the ceilings it applied, and the
// process goes on learning; when a server is back on the address, the
// client reconnects (opamp-go's backoff) and takes the new ceilings.
func TestClientKeepsCeilingsAndLearningWhenTheConnectionIsLost(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	rec, live := newLive(t, time.Second)
	c := start(t, f, live, budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	rc := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 90, "search": 30}), budgetopamp.ContentType)
	waitCeiling(t, live, "fetch", 90*time.Millisecond, f.push("checkout", rc))

	f.kill()
	require.Eventually(t, func() bool { return !c.Status().Connected && c.Status().ConnectError != nil }, 20*time.Second, time.Millisecond,
		"the client saw the connection go and failed to reconnect")
	lc, ok := live.Ceiling("fetch")
	require.True(t, ok, "the last ceilings stay")
	assert.Equal(t, 90*time.Millisecond, lc.Ceiling)
	assert.Equal(t, 1, c.Status().Applied)

	for range 100 {
		rec.Record("fetch", deadline.EndedCompleted, 20*time.Millisecond, t0)
	}
	lc, _ = live.Ceiling("fetch")
	assert.InEpsilon(t, 24*time.Millisecond, lc.Ceiling, 0.02, "local learning goes on, offline")

	f.start(f.addr) // a server is back, same address, newer ceilings
	rc2 := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 95, "search": 35}), budgetopamp.ContentType)
	f.push("checkout", rc2)
	waitCeiling(t, live, "search", 35*time.Millisecond, time.Now())
	lc, _ = live.Ceiling("fetch")
	assert.InEpsilon(t, 24*time.Millisecond, lc.Ceiling, 0.02, "fetch keeps its own")
	assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED, f.status(rc2.ConfigHash).Status)
	assert.True(t, c.Status().Connected)
}

// Bad bodies are answered FAILED with a message naming what was wrong, and
// change nothing: the ceilings applied before stay.
func TestClientRefusesBadBodies(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	_, live := newLive(t, time.Second)
	c := start(t, f, live, budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	good := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 90}), budgetopamp.ContentType)
	waitCeiling(t, live, "fetch", 90*time.Millisecond, f.push("checkout", good))

	noKey := &protobufs.AgentRemoteConfig{Config: &protobufs.AgentConfigMap{ConfigMap: map[string]*protobufs.AgentConfigFile{"other": {Body: []byte("x")}}}, ConfigHash: []byte("no-key")}
	cases := []struct {
		name string
		rc   *protobufs.AgentRemoteConfig
		msg  string
	}{
		{"other schema", remoteConfig([]byte(`{"schema":"deadline.fleet.ceilings/v2","service":"checkout","steps":{}}`), budgetopamp.ContentType), `schema "deadline.fleet.ceilings/v2": want exactly "deadline.fleet.ceilings/v1"`},
		{"zero ceiling", remoteConfig([]byte(`{"schema":"deadline.fleet.ceilings/v1","service":"checkout","steps":{"fetch":{"ceiling_ms":0,"quantile":0.99}}}`), budgetopamp.ContentType), `steps["fetch"].ceiling_ms 0: want a finite number of milliseconds > 0`},
		{"negative ceiling", remoteConfig([]byte(`{"schema":"deadline.fleet.ceilings/v1","service":"checkout","steps":{"fetch":{"ceiling_ms":-3,"quantile":0.99}}}`), budgetopamp.ContentType), `steps["fetch"].ceiling_ms -3`},
		{"not json", remoteConfig([]byte(`{"schema":`), budgetopamp.ContentType), "body (10 bytes): want a JSON object"},
		{"another service", remoteConfig(body(t, "billing", map[string]float64{"fetch": 10}), budgetopamp.ContentType), `service "billing": want "checkout", this client's service.name`},
		{"content type", remoteConfig(body(t, "checkout", map[string]float64{"fetch": 10}), "text/yaml"), `content_type "text/yaml": want "application/json"`},
		{"no entry", noKey, `config_map ["other"]: want an entry "deadline.ceilings"`},
	}
	for i, tc := range cases {
		f.push("checkout", tc.rc)
		st := f.status(tc.rc.ConfigHash)
		assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED, st.Status, tc.name)
		assert.Contains(t, st.ErrorMessage, tc.msg, tc.name)
		lc, ok := live.Ceiling("fetch")
		assert.True(t, ok, tc.name)
		assert.Equal(t, 90*time.Millisecond, lc.Ceiling, "%s: nothing changed", tc.name)
		s := c.Status()
		assert.Equal(t, i+1, s.Refused, tc.name)
		assert.ErrorIs(t, s.LastRefusal, budgetopamp.ErrInvalidBody, tc.name)
		assert.Equal(t, good.ConfigHash, s.Hash, "%s: the applied config is still the good one", tc.name)
	}
}

// A pushed ceiling below the client's floor (1 ms by default, or
// WithMinCeiling) is refused whole: FAILED, counted, nothing applied.
func TestClientRefusesCeilingsBelowItsFloor(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  []budgetopamp.Option
		low   float64 // ms
		floor string
	}{
		"default floor, 1 ns":   {nil, 1e-6, ">= 1ms"},
		"default floor, 0.9 ms": {nil, 0.9, ">= 1ms"},
		"policy floor 20 ms":    {[]budgetopamp.Option{budgetopamp.WithMinCeiling(20 * time.Millisecond)}, 19, ">= 20ms"},
	} {
		t.Run(name, func(t *testing.T) {
			f := startFleetServer(t, "127.0.0.1:0")
			_, live := newLive(t, time.Second)
			c := start(t, f, live, append([]budgetopamp.Option{budgetopamp.WithServiceName("checkout")}, tc.opts...)...)
			f.agent("checkout")
			good := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 90, "search": 40}), budgetopamp.ContentType)
			waitCeiling(t, live, "fetch", 90*time.Millisecond, f.push("checkout", good))

			low := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 80, "search": tc.low}), budgetopamp.ContentType)
			f.push("checkout", low)
			st := f.status(low.ConfigHash)
			assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED, st.Status)
			assert.Contains(t, st.ErrorMessage, `steps["search"].ceiling_ms`)
			assert.Contains(t, st.ErrorMessage, tc.floor)
			for step, want := range map[string]time.Duration{"fetch": 90 * time.Millisecond, "search": 40 * time.Millisecond} {
				lc, ok := live.Ceiling(step)
				require.True(t, ok)
				assert.Equal(t, want, lc.Ceiling, "%s: nothing applied", step)
			}
			s := c.Status()
			assert.Equal(t, 1, s.Refused)
			assert.Equal(t, 1, s.Applied)
			assert.ErrorIs(t, s.LastRefusal, budgetopamp.ErrInvalidBody)
		})
	}
}

type sinkFunc func(map[string]learn.Prior) error

func (f sinkFunc) SetPriors(p map[string]learn.Prior) error { return f(p) }

// A sink that refuses the priors makes the config FAILED with its message.
func TestClientReportsTheSinksRefusal(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	c := start(t, f, sinkFunc(func(map[string]learn.Prior) error { return errors.New("sink: cannot take them") }), budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	rc := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 90}), budgetopamp.ContentType)
	f.push("checkout", rc)
	st := f.status(rc.ConfigHash)
	assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_FAILED, st.Status)
	assert.Equal(t, "sink: cannot take them", st.ErrorMessage)
	assert.Zero(t, c.Status().Applied)
}

// A fleet ceiling above the policy's Max is served as Max: the fleet never
// raises a ceiling beyond what the client allows. The status keeps what
// the fleet sent.
func TestClientFleetCeilingClampedToMax(t *testing.T) {
	f := startFleetServer(t, "127.0.0.1:0")
	_, live := newLive(t, 200*time.Millisecond)
	c := start(t, f, live, budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	rc := remoteConfig(body(t, "checkout", map[string]float64{"fetch": 5000, "search": 150}), budgetopamp.ContentType)
	f.push("checkout", rc)
	waitCeiling(t, live, "fetch", 200*time.Millisecond, time.Now())
	lc, _ := live.Ceiling("search")
	assert.Equal(t, 150*time.Millisecond, lc.Ceiling, "below Max: as sent")
	assert.Equal(t, 5000.0, c.Status().Ceilings.Steps["fetch"].CeilingMS)
	assert.Equal(t, protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED, f.status(rc.ConfigHash).Status)
}

// service.name defaults to OTEL_SERVICE_NAME.
func TestClientServiceNameFromTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	f := startFleetServer(t, "127.0.0.1:0")
	_, live := newLive(t, time.Second)
	start(t, f, live)
	a := f.agent("from-env")
	assert.NotEmpty(t, a.instance, "a fresh instance id")
}

func TestStartRefusesBadArguments(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	_, live := newLive(t, time.Second)
	var nilLive *learn.Live
	ok := budgetopamp.WithServiceName("s")
	for name, tc := range map[string]struct {
		endpoint string
		sink     budgetopamp.Sink
		opts     []budgetopamp.Option
		field    string
	}{
		"empty endpoint": {"", live, []budgetopamp.Option{ok}, "endpoint"},
		"http endpoint":  {"http://127.0.0.1:1/v1/opamp", live, []budgetopamp.Option{ok}, "endpoint"},
		"no host":        {"ws:///v1/opamp", live, []budgetopamp.Option{ok}, "endpoint"},
		"nil sink":       {"ws://127.0.0.1:1/v1/opamp", nil, []budgetopamp.Option{ok}, "sink"},
		"typed nil Live": {"ws://127.0.0.1:1/v1/opamp", nilLive, []budgetopamp.Option{ok}, "sink"},
		"no service":     {"ws://127.0.0.1:1/v1/opamp", live, nil, "WithServiceName"},
		"empty service":  {"ws://127.0.0.1:1/v1/opamp", live, []budgetopamp.Option{budgetopamp.WithServiceName("")}, "WithServiceName"},
		"empty instance": {"ws://127.0.0.1:1/v1/opamp", live, []budgetopamp.Option{ok, budgetopamp.WithInstanceID("")}, "WithInstanceID"},
		"nil logger":     {"ws://127.0.0.1:1/v1/opamp", live, []budgetopamp.Option{ok, budgetopamp.WithLogger(nil)}, "WithLogger"},
		"zero floor":     {"ws://127.0.0.1:1/v1/opamp", live, []budgetopamp.Option{ok, budgetopamp.WithMinCeiling(0)}, "WithMinCeiling"},
	} {
		c, err := budgetopamp.Start(context.Background(), tc.endpoint, tc.sink, tc.opts...)
		assert.Nil(t, c, name)
		var ce *budgetopamp.ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, tc.field, ce.Field, name)
		assert.ErrorIs(t, err, budgetopamp.ErrInvalidConfig, name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := budgetopamp.Start(ctx, "ws://127.0.0.1:1/v1/opamp", live, ok)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, context.Canceled)
}

// timedSink is a Live that notes when each SetPriors returned: from that
// instant on, Live.Ceiling returns the new ceilings.
type timedSink struct {
	live *learn.Live
	done chan time.Time
}

func (s timedSink) SetPriors(p map[string]learn.Prior) error {
	err := s.live.SetPriors(p)
	s.done <- time.Now()
	return err
}

// BenchmarkPickup is the time from the server's push of new ceilings (just
// before its Send) to the instant Live.Ceiling returns them (SetPriors
// returned), real time over loopback, one push of a new body per
// iteration, each checked with Ceiling. Each iteration then waits for the
// server to receive the APPLIED status, so that no answer to an older
// status resends an older body during the next one. Reported: p50-µs and
// p99-µs of the latencies; ns/op includes the status's round trip.
func BenchmarkPickup(b *testing.B) {
	f := startFleetServer(b, "127.0.0.1:0")
	_, live := newLive(b, time.Hour)
	sink := timedSink{live, make(chan time.Time, 1)}
	start(b, f, sink, budgetopamp.WithServiceName("checkout"))
	f.agent("checkout")
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		want := 100*time.Millisecond + time.Duration(i)*time.Microsecond
		rc := remoteConfig(body(b, "checkout", map[string]float64{"fetch": float64(want) / 1e6}), budgetopamp.ContentType)
		at := f.push("checkout", rc)
		var applied time.Time
		select {
		case applied = <-sink.done:
		case <-time.After(20 * time.Second):
			b.Fatal("no SetPriors within 20s")
		}
		if c, ok := live.Ceiling("fetch"); !ok || c.Ceiling != want {
			b.Fatalf("Ceiling %v %v after SetPriors, want %v", c, ok, want)
		}
		lat = append(lat, applied.Sub(at))
		f.status(rc.ConfigHash)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkColdStart is the time from Start to the instant Live.Ceiling
// returns the fleet's ceiling, for a fresh client of a server that has the
// service's ceilings already: the WebSocket handshake, the first message
// and its answer. Real time over loopback; each iteration's Stop is not
// counted in p50-µs and p99-µs (it is in ns/op).
func BenchmarkColdStart(b *testing.B) {
	f := startFleetServer(b, "127.0.0.1:0")
	f.push("checkout", remoteConfig(body(b, "checkout", map[string]float64{"fetch": 80}), budgetopamp.ContentType))
	var lat []time.Duration
	for b.Loop() {
		_, live := newLive(b, time.Second)
		sink := timedSink{live, make(chan time.Time, 1)}
		started := time.Now()
		c, err := budgetopamp.Start(context.Background(), f.endpoint(), sink, budgetopamp.WithServiceName("checkout"))
		if err != nil {
			b.Fatal(err)
		}
		select {
		case applied := <-sink.done:
			lat = append(lat, applied.Sub(started))
		case <-time.After(20 * time.Second):
			b.Fatal("no SetPriors within 20s")
		}
		if c, ok := live.Ceiling("fetch"); !ok || c.Ceiling != 80*time.Millisecond {
			b.Fatalf("Ceiling %v %v", c, ok)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Stop(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
