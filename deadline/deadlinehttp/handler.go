package deadlinehttp

import (
	"net/http"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// DefaultMaxBudget is the largest budget [NewHandler] grants a request, and
// the budget of a request that arrives without a usable budget header: 30
// seconds. Change it with [WithMaxBudget].
const DefaultMaxBudget = 30 * time.Second

// HandlerOption configures the middleware made by [NewHandler].
type HandlerOption interface{ apply(*handlerConfig) }

type handlerOptionFunc func(*handlerConfig)

func (f handlerOptionFunc) apply(c *handlerConfig) { f(c) }

type handlerConfig struct {
	max       time.Duration
	floor     time.Duration
	strip     bool
	header    string
	malformed func(r *http.Request, value string)
	err       error // the first invalid option, returned by NewHandler
}

func (c *handlerConfig) fail(field string, value any, allowed string) {
	if c.err == nil {
		c.err = &deadline.PolicyError{Field: field, Value: value, Allowed: allowed}
	}
}

// WithMaxBudget sets the server's own maximum (default [DefaultMaxBudget]).
// An inbound budget larger than d is clamped to d: a client can never grant
// the server more time than it allows. A request with no budget header, or
// a malformed one, or one stripped by [WithStripHeader], gets d. d <= 0 is
// invalid, and so is a d at or below the floor (see [NewHandler]).
func WithMaxBudget(d time.Duration) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		if d <= 0 {
			c.fail("deadlinehttp.WithMaxBudget", d, "> 0")
			return
		}
		c.max = d
	})
}

// WithFloor sets the server's floor (default 0: no refusal). A request whose
// budget, after the clamp, is at or below d is answered at once with 504
// Gateway Timeout and a [RefusedHeader], and the wrapped handler is not
// called: the work could not finish in time. d < 0 is invalid, and so is a
// d at or above the maximum, which would refuse every request (see
// [NewHandler]).
func WithFloor(d time.Duration) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		if d < 0 {
			c.fail("deadlinehttp.WithFloor", d, ">= 0")
			return
		}
		c.floor = d
	})
}

// WithStripHeader makes the middleware a trust edge: the inbound budget
// header is ignored and removed from the request before the wrapped handler
// sees it, and every request gets the maximum budget ([WithMaxBudget]). Use
// it where requests come from clients whose budget you do not accept.
func WithStripHeader() HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.strip = true })
}

// WithInboundHeader sets the name of the budget header the middleware reads
// (default [DefaultHeader]). A name that is not an HTTP token, the empty
// name included, is invalid (see [NewHandler]).
func WithInboundHeader(name string) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) {
		if !isToken(name) {
			c.fail("deadlinehttp.WithInboundHeader", name, "an HTTP token (letters, digits and !#$%&'*+-.^_`|~)")
			return
		}
		c.header = name
	})
}

// WithMalformed sets a function called, on the request's goroutine, with the
// request and the header's value whenever the budget header is present but
// malformed (see [ParseBudget]; several header lines are joined with ", "
// and count as malformed). Use it to count or log; the header is ignored
// either way. A nil f calls nothing.
func WithMalformed(f func(r *http.Request, value string)) HandlerOption {
	return handlerOptionFunc(func(c *handlerConfig) { c.malformed = f })
}

// NewHandler returns middleware that gives every request a budget and runs
// next under it.
//
// On arrival it reads the budget header ([DefaultHeader],
// [WithInboundHeader]; the milliseconds the caller's attempt was granted,
// see [ParseBudget]) and converts it to a local [deadline.Deadline] starting
// now, clamped to the server's maximum ([WithMaxBudget]). No header, a
// malformed one (reported to [WithMalformed]) or a stripped one
// ([WithStripHeader]) gives the maximum. If the request's context already
// carries an earlier deadline, that one is kept.
//
// A budget at or below the floor ([WithFloor]) is refused: the response is
// 504 Gateway Timeout with [RefusedHeader] and a one-line text body that
// repeats the header ("deadline budget too small: budget-ms=5,
// floor-ms=20"), and next is not called. Nothing else about the server's
// configuration appears in any response.
//
// Otherwise next runs with a request whose context carries the Deadline
// ([deadline.NewContext]) and ends at it ([deadline.Deadline.Scope]), so
// that [deadline.FromContext], ctx.Done() and a [Transport] used inside the
// handler all spend the same budget.
//
// # Errors
//
// NewHandler checks its arguments once, here, never per request: a nil
// next, WithMaxBudget(d <= 0), WithFloor(d < 0), a floor at or above the
// maximum (every request would be refused), and a header name that is not an
// HTTP token. It then returns a nil handler and a [*deadline.PolicyError]
// naming the first problem (errors.Is(err, [deadline.ErrInvalidPolicy])).
// Nil options are ignored.
func NewHandler(next http.Handler, opts ...HandlerOption) (http.Handler, error) {
	c := handlerConfig{max: DefaultMaxBudget, header: DefaultHeader}
	if next == nil {
		c.fail("deadlinehttp.NewHandler next", "<nil>", "a non-nil http.Handler")
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.floor >= c.max {
		c.fail("deadlinehttp.WithFloor", c.floor, "below the maximum budget "+c.max.String()+" (WithMaxBudget), or every request is refused")
	}
	if c.err != nil {
		return nil, c.err
	}
	return &handler{next: next, cfg: c}, nil
}

type handler struct {
	next http.Handler
	cfg  handlerConfig
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	budget := h.inbound(r)
	if budget <= h.cfg.floor {
		refused := "budget-ms=" + FormatBudget(budget) + ", floor-ms=" + FormatBudget(h.cfg.floor)
		w.Header().Set(RefusedHeader, refused)
		http.Error(w, "deadline budget too small: "+refused, http.StatusGatewayTimeout)
		return
	}
	d := deadline.New(budget)
	if outer, ok := deadline.FromContext(r.Context()); ok && outer.End().Before(d.End()) {
		d = outer
	}
	ctx, cancel := d.Scope(deadline.NewContext(r.Context(), d))
	defer cancel()
	h.next.ServeHTTP(w, r.WithContext(ctx))
}

// inbound returns the request's budget: the header's, clamped, or the max.
func (h *handler) inbound(r *http.Request) time.Duration {
	if h.cfg.strip {
		r.Header.Del(h.cfg.header)
		return h.cfg.max
	}
	vals := r.Header.Values(h.cfg.header)
	if len(vals) == 0 {
		return h.cfg.max
	}
	if len(vals) == 1 {
		if d, ok := ParseBudget(vals[0]); ok {
			return min(d, h.cfg.max)
		}
	}
	if h.cfg.malformed != nil {
		h.cfg.malformed(r, strings.Join(vals, ", "))
	}
	return h.cfg.max
}
