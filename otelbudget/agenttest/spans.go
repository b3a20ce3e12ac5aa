package agenttest

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// NewRecorder returns an SDK tracer provider whose ended spans the
// returned recorder keeps.
func NewRecorder() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// Registry is the pinned GenAI conventions' registry, as
// otelbudget/genai/testdata/registry-keys.txt copies it from the
// conventions' YAML (not from our constants): the attribute keys, the
// operation names and the span-name format of each span type.
type Registry struct {
	Keys       map[string]bool
	Operations map[string]bool
	Spans      map[string]string // span type -> name format, "{key}" placeholders
}

// ReadRegistry reads the registry file at path.
func ReadRegistry(path string) (Registry, error) {
	f, err := os.Open(path)
	if err != nil {
		return Registry{}, err
	}
	defer f.Close()
	reg := Registry{Keys: map[string]bool{}, Operations: map[string]bool{}, Spans: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "key":
			reg.Keys[fields[1]] = true
		case "operation":
			reg.Operations[fields[1]] = true
		case "span":
			reg.Spans[fields[1]] = strings.Join(fields[2:], " ")
		}
	}
	if err := sc.Err(); err != nil {
		return reg, err
	}
	if len(reg.Keys) == 0 {
		return reg, fmt.Errorf("agenttest: %s holds no key", path)
	}
	return reg, nil
}

// Name fills the span-name format of span type typ with attrs; ok is false
// when the registry has no such type or a placeholder stays unfilled.
func (r Registry) Name(typ string, attrs map[string]string) (string, bool) {
	f, ok := r.Spans[typ]
	if !ok {
		return "", false
	}
	for k, v := range attrs {
		f = strings.ReplaceAll(f, "{"+k+"}", v)
	}
	return f, !strings.Contains(f, "{")
}

// UnknownGenAIKeys returns the gen_ai.* keys (and error.type) of spans
// that are not in the registry, as "span: key".
func (r Registry) UnknownGenAIKeys(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			k := string(kv.Key)
			if (strings.HasPrefix(k, "gen_ai.") || k == "error.type") && !r.Keys[k] {
				out = append(out, s.Name()+": "+k)
			}
		}
	}
	return out
}

// responseKeys are left out of the shape: a chat span carries them when the
// provider's client returns them (eino-ext's OpenAI model gives the id, not
// the model; Genkit's compat_oai both, only with a system_fingerprint), not
// by the adapter's choice.
var responseKeys = map[string]bool{"gen_ai.response.id": true, "gen_ai.response.model": true}

// ours reports whether a span is one an agent run's shape includes: the
// run, call and attempt spans of this project and the HTTP spans below
// them, not the framework's own (Genkit's "genkit-tracer" spans).
func ours(s sdktrace.ReadOnlySpan) bool {
	return s.InstrumentationScope().Name != "genkit-tracer"
}

// Shape is the canonical dump of the agent run's spans among spans: one
// line a span, indented by its depth below the run (a span's parent is its
// nearest ancestor the shape includes: the framework's own spans are left
// out), children in start order, each line "name KIND keys" where keys are
// the span's attribute keys in the gen_ai.*, deadline.*, error.type and
// http.* namespaces, sorted, but gen_ai.response.id and
// gen_ai.response.model (the provider's client's to give) (values are not compared: they are the run's).
// Two frameworks that give the same scenario the same Shape give it the
// same span tree, names, kinds and attribute keys.
func Shape(spans []sdktrace.ReadOnlySpan) string {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	parentOf := func(s sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, bool) {
		for id := s.Parent().SpanID(); id.IsValid(); {
			p, ok := byID[id]
			if !ok {
				return nil, false
			}
			if ours(p) {
				return p, true
			}
			id = p.Parent().SpanID()
		}
		return nil, false
	}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if !ours(s) {
			continue
		}
		if p, ok := parentOf(s); ok {
			children[p.SpanContext().SpanID()] = append(children[p.SpanContext().SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int {
		if c := a.StartTime().Compare(b.StartTime()); c != 0 {
			return c
		}
		return strings.Compare(a.Name(), b.Name())
	}
	var sb strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		var keys []string
		for _, kv := range s.Attributes() {
			k := string(kv.Key)
			if responseKeys[k] {
				continue
			}
			if strings.HasPrefix(k, "gen_ai.") || strings.HasPrefix(k, "deadline.") || strings.HasPrefix(k, "http.") || k == "error.type" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		fmt.Fprintf(&sb, "%s%s %s %s\n", strings.Repeat("  ", depth), s.Name(), strings.ToUpper(s.SpanKind().String()), strings.Join(keys, ","))
		kids := children[s.SpanContext().SpanID()]
		slices.SortFunc(kids, byStart)
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	return sb.String()
}
