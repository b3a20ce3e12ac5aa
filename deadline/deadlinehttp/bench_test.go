package deadlinehttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// BenchmarkTransport measures the success path: a GET answered 200 by a
// loopback server, through the Transport ("deadlinehttp") and straight
// through its base ("bare"), one connection kept alive.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	run := func(b *testing.B, rt http.RoundTripper) {
		client := &http.Client{Transport: rt}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, srv.Client().Transport) })
	b.Run("deadlinehttp", func(b *testing.B) { run(b, deadlinehttp.NewTransport(srv.Client().Transport)) })
}

// BenchmarkTransportOverhead measures what the Transport itself costs on
// the success path, over a base that answers 200 at once from memory.
func BenchmarkTransportOverhead(b *testing.B) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/x", nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := deadlinehttp.NewTransport(base)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
