package deadlinehttp

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// The conventions below are those of the OpenAI and Anthropic APIs (and of
// Azure OpenAI), which the SDKs generated for them follow, beside RFC 9110's
// Retry-After and idempotent methods. docs/propagation.md in the repository
// states the whole rule.

// RetryAfterMsHeader is the response header in which the OpenAI and
// Anthropic APIs ask for a delay before a retry in milliseconds: a
// millisecond Retry-After ([ParseRetryAfterMs] reads its value). On an
// overload answer (429, 503, [StatusOverloaded]) a valid value takes
// precedence over [AzureRetryAfterMsHeader] and Retry-After.
const RetryAfterMsHeader = "Retry-After-Ms"

// AzureRetryAfterMsHeader is Azure OpenAI's name for [RetryAfterMsHeader]
// ("x-ms-retry-after-ms"), with the same value. A valid value is used when
// RetryAfterMsHeader has none, and takes precedence over Retry-After.
const AzureRetryAfterMsHeader = "X-Ms-Retry-After-Ms"

// ShouldRetryHeader is the response header in which a provider says whether
// a retry can succeed and is safe: "true" or "false" ([ParseShouldRetry]).
// On an answer whose status is retryable ([WithRetryStatuses]), "false"
// means the request is not retried, whatever its method, Idempotency-Key or
// the policy's classifier; "true" means the request was not acted on, so
// it may be retried even when its method is not idempotent (a chat
// completion is a POST), as long as its body can be replayed, and still
// only as the policy's classifier, attempts, floor, deadline and retry
// budget allow. Any other value, and a header sent more than once, is
// ignored: the status and the method decide, as without it. On any other
// status (a success, a 400) the header changes nothing.
const ShouldRetryHeader = "X-Should-Retry"

// StatusOverloaded is 529, the status Anthropic's API answers when it is
// overloaded. The [Transport] treats it as a 503: retryable where the
// request may be retried, its delay headers honoured, and charged to the
// retry budget as an overload signal ([WithOverloadCharge]).
const StatusOverloaded = 529

// ParseRetryAfterMs parses a [RetryAfterMsHeader] (or
// [AzureRetryAfterMsHeader]) value into the delay it asks for.
//
// The value is a non-negative decimal number of milliseconds, with
// surrounding spaces or tabs allowed: one or more ASCII digits, optionally
// followed by a dot and one or more digits ("1500", "0", "20.5"). A
// fraction is kept to the nanosecond and rounded up beyond it, so the delay
// is never shorter than asked.
//
// It reports false, and a zero delay, for anything else: an empty value, a
// sign ("-5", "+5"), an exponent, a unit, a list of several values, a
// number too large for a time.Duration, and any delay longer than
// [MaxRetryAfter]. A true result is always in [0, MaxRetryAfter].
func ParseRetryAfterMs(value string) (time.Duration, bool) {
	d, ok := parseRetryAfterMs(value)
	if !ok || d > MaxRetryAfter {
		return 0, false
	}
	return d, true
}

// parseRetryAfterMs is ParseRetryAfterMs without the MaxRetryAfter cap: a
// well-formed value too large for a time.Duration saturates at the largest
// one, as parseRetryAfter does, so that the transport stops on it rather
// than retrying sooner than the server asked.
func parseRetryAfterMs(value string) (time.Duration, bool) {
	v := strings.Trim(value, " \t")
	whole, frac, dot := strings.Cut(v, ".")
	if whole == "" || dot && frac == "" {
		return 0, false
	}
	const maxMs = int64(math.MaxInt64 / int64(time.Millisecond))
	var ms int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms <= maxMs {
			ms = ms*10 + int64(c-'0')
		}
	}
	// The fraction in nanoseconds: six digits, the rest rounds up.
	var ns int64
	scale := int64(time.Millisecond / 10)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		switch {
		case scale > 0:
			ns += int64(c-'0') * scale
			scale /= 10
		case c != '0' && scale == 0:
			ns, scale = ns+1, -1 // round up once
		}
	}
	if ms > (math.MaxInt64-ns)/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(ms)*time.Millisecond + time.Duration(ns), true
}

// ParseShouldRetry parses a [ShouldRetryHeader] value: "true" or "false",
// ASCII case-insensitive, with surrounding spaces or tabs allowed. ok is
// false for any other value, which the [Transport] ignores.
func ParseShouldRetry(value string) (retry, ok bool) {
	// EqualFold alone would also accept Unicode folds ("falſe"): the
	// lengths keep it to ASCII.
	switch v := strings.Trim(value, " \t"); {
	case len(v) == len("true") && strings.EqualFold(v, "true"):
		return true, true
	case len(v) == len("false") && strings.EqualFold(v, "false"):
		return false, true
	}
	return false, false
}

// overloadAnswer reports whether code is an overload answer: 429, 503 or 529. On
// these a server's delay is honoured and, without one, the retry budget is
// charged ([WithOverloadCharge]).
func overloadAnswer(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == StatusOverloaded
}

// serverDelay returns the delay h asks for before a retry: the first valid
// one of [RetryAfterMsHeader], [AzureRetryAfterMsHeader] and Retry-After. A
// millisecond header counts only when it is sent once; several lines are a
// malformed value, ignored like any other. A well-formed value too large
// for a time.Duration saturates (see parseRetryAfter).
func serverDelay(h http.Header, now time.Time) (time.Duration, bool) {
	for _, name := range [...]string{RetryAfterMsHeader, AzureRetryAfterMsHeader} {
		if vs := h[name]; len(vs) == 1 {
			if d, ok := parseRetryAfterMs(vs[0]); ok {
				return d, true
			}
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		return parseRetryAfter(v, now)
	}
	return 0, false
}

// advice is what a response's [ShouldRetryHeader] says.
type advice uint8

const (
	adviceNone    advice = iota // absent, invalid or sent more than once
	adviceRetry                 // "true": not acted on, a retry is safe
	adviceNoRetry               // "false": never retried
)

// shouldRetry reads h's [ShouldRetryHeader]: one line with a valid value.
func shouldRetry(h http.Header) advice {
	vs := h[ShouldRetryHeader]
	if len(vs) != 1 {
		return adviceNone
	}
	switch retry, ok := ParseShouldRetry(vs[0]); {
	case !ok:
		return adviceNone
	case retry:
		return adviceRetry
	}
	return adviceNoRetry
}

// adviceOf returns the advice of the response whose StatusError err wraps.
func adviceOf(err error) advice {
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.advice
	}
	return adviceNone
}

// classifier returns the classifier of a request whose body can be
// replayed: retry (nil: [deadline.IsRetryable]) bounded by what is safe to
// repeat and by the server's [ShouldRetryHeader]. An idempotent request is
// retried as retry says, unless the server said "false" (send leaves such
// an error unmarked, so the default classifier needs no wrapping); any
// other one only on an answer that said "true".
func classifier(retry func(error) bool, idempotent bool) func(error) bool {
	switch {
	case idempotent && retry == nil:
		return nil
	case idempotent:
		return func(err error) bool { return adviceOf(err) != adviceNoRetry && retry(err) }
	case retry == nil:
		return retryInvited
	}
	return func(err error) bool { return adviceOf(err) == adviceRetry && retry(err) }
}

// retryInvited is the default classifier of a request that is not
// idempotent: retried only on an answer that said "x-should-retry: true".
func retryInvited(err error) bool {
	return adviceOf(err) == adviceRetry && deadline.IsRetryable(err)
}
