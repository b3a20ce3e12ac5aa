package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// HTTPClient sends one logical HTTP request with retries under one
// library's configuration.
type HTTPClient interface {
	// Name is the library's short name, as printed in the tables.
	Name() string
	// Config describes how the library is configured from a Call.
	Config() string
	// Send sends one request with the given method, URL and body (nil for
	// none) through base, retrying as the library does, and returns the
	// status of the response it handed back (0 when none) and its error. The
	// response body is read and closed. ctx may or may not carry a deadline;
	// the library's own overall limit is c.Budget where it has one.
	Send(ctx context.Context, c Call, base http.RoundTripper, method, url string, body []byte) (int, error)
}

// AllHTTP returns one HTTPClient per library, in the order of the tables:
// this project, failsafe-go's failsafehttp, go-retryablehttp, then the
// general-purpose libraries driving a plain http.Client, then the
// hand-written loop.
func AllHTTP() []HTTPClient {
	return []HTTPClient{DeadlineHTTP{}, FailsafeHTTP{}, RetryableHTTP{}, OpHTTP{Cenkalti{}}, OpHTTP{Avast{}}, OpHTTP{Sethvargo{}}, OpHTTP{Baseline{}}}
}

// OpHTTP drives a plain http.Client from a general-purpose Retrier, with the
// classification a user writes after the libraries' own HTTP examples:
// 2xx succeeds; 408, 429, 500, 502, 503, 504 and transport errors are
// transient ([Failure], with the delta-seconds Retry-After of a 429 or 503);
// anything else is final. None of these libraries has an idempotency rule,
// so the method does not enter into it.
type OpHTTP struct{ Retrier }

// Config describes the retrier and the op.
func (h OpHTTP) Config() string {
	return h.Retrier.Config() + "; op = one http.Client.Do classified by status"
}

// Send runs the op under the retrier.
func (h OpHTTP) Send(ctx context.Context, c Call, base http.RoundTripper, method, url string, body []byte) (int, error) {
	client := &http.Client{Transport: base}
	var status atomic.Int64
	err := h.Do(ctx, c, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, method, url, bodyOf(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return &Failure{Err: err}
		}
		status.Store(int64(resp.StatusCode))
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return classify(resp)
	})
	return int(status.Load()), err
}

// classify turns a response into the user's error.
func classify(resp *http.Response) error {
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s == 429 || s == 503:
		f := &Failure{Status: s}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			f.RetryAfter = secondsToDuration(n)
		}
		return f
	case s == 408 || s == 500 || s == 502 || s == 504:
		return &Failure{Status: s}
	default:
		return fmt.Errorf("HTTP %d", s)
	}
}

func bodyOf(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

// drain reads and closes a response's body and returns its status.
func drain(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
