package genai

import (
	"bufio"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// pinned is testdata/registry-keys.txt: what the pinned conventions define,
// copied from their YAML, never from this package.
type pinned struct {
	header     string
	keys       map[string]string // key -> file that defines or references it
	operations map[string]bool
	spans      map[string]string // span type -> name format
}

func readPinned(t *testing.T) pinned {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "registry-keys.txt"))
	require.NoError(t, err)
	defer f.Close()
	p := pinned{keys: map[string]string{}, operations: map[string]bool{}, spans: map[string]string{}}
	var header strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			header.WriteString(line + "\n")
			continue
		}
		fields := strings.Fields(line)
		require.GreaterOrEqual(t, len(fields), 2, "testdata line %q", line)
		switch fields[0] {
		case "key":
			p.keys[fields[1]] = fields[2]
		case "operation":
			p.operations[fields[1]] = true
		case "span":
			p.spans[fields[1]] = strings.Join(fields[2:], " ")
		default:
			t.Fatalf("testdata line %q: unknown kind %q", line, fields[0])
		}
	}
	require.NoError(t, sc.Err())
	p.header = header.String()
	return p
}

// exportedConsts lists the exported constants declared in the package's
// non-test files, so a constant added without a line below fails the test.
func exportedConsts(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

var exportedKeys = map[string]attribute.Key{
	"OperationNameKey":         OperationNameKey,
	"ProviderNameKey":          ProviderNameKey,
	"RequestModelKey":          RequestModelKey,
	"ResponseModelKey":         ResponseModelKey,
	"ResponseIDKey":            ResponseIDKey,
	"ResponseFinishReasonsKey": ResponseFinishReasonsKey,
	"UsageInputTokensKey":      UsageInputTokensKey,
	"UsageOutputTokensKey":     UsageOutputTokensKey,
	"AgentNameKey":             AgentNameKey,
	"AgentIDKey":               AgentIDKey,
	"AgentDescriptionKey":      AgentDescriptionKey,
	"ToolNameKey":              ToolNameKey,
	"ToolCallIDKey":            ToolCallIDKey,
	"ToolTypeKey":              ToolTypeKey,
	"ToolDescriptionKey":       ToolDescriptionKey,
	"ConversationIDKey":        ConversationIDKey,
	"ErrorTypeKey":             ErrorTypeKey,
	"ServerAddressKey":         ServerAddressKey,
	"ServerPortKey":            ServerPortKey,
	"JSONRPCRequestIDKey":      JSONRPCRequestIDKey,
	"NetworkTransportKey":      NetworkTransportKey,
	"RPCResponseStatusCodeKey": RPCResponseStatusCodeKey,
	"MCPMethodNameKey":         MCPMethodNameKey,
	"MCPSessionIDKey":          MCPSessionIDKey,
	"MCPProtocolVersionKey":    MCPProtocolVersionKey,
}

var exportedOperations = map[string]string{
	"OperationChat":            OperationChat,
	"OperationGenerateContent": OperationGenerateContent,
	"OperationInvokeAgent":     OperationInvokeAgent,
	"OperationExecuteTool":     OperationExecuteTool,
}

// Every exported key is one the pinned conventions define or reference.
func TestKeysExistInPinnedRegistry(t *testing.T) {
	p := readPinned(t)
	for name, key := range exportedKeys {
		_, ok := p.keys[string(key)]
		assert.True(t, ok, "%s = %q is not in the pinned registry (testdata/registry-keys.txt)", name, key)
	}
	for name, op := range exportedOperations {
		assert.True(t, p.operations[op], "%s = %q is not a member of gen_ai.operation.name at the pin", name, op)
	}
	// The brief's minimum set is there, with the conventions' names.
	for name, want := range map[string]string{
		"OperationNameKey": "gen_ai.operation.name", "ProviderNameKey": "gen_ai.provider.name",
		"RequestModelKey": "gen_ai.request.model", "ResponseModelKey": "gen_ai.response.model",
		"AgentNameKey": "gen_ai.agent.name", "AgentIDKey": "gen_ai.agent.id",
		"ToolNameKey": "gen_ai.tool.name", "ToolCallIDKey": "gen_ai.tool.call.id",
		"ToolTypeKey": "gen_ai.tool.type", "ConversationIDKey": "gen_ai.conversation.id",
		"ErrorTypeKey": "error.type", "JSONRPCRequestIDKey": "jsonrpc.request.id",
		"NetworkTransportKey": "network.transport", "MCPMethodNameKey": "mcp.method.name",
		"MCPSessionIDKey": "mcp.session.id",
	} {
		assert.Equal(t, want, string(exportedKeys[name]), name)
	}
}

// Every exported constant of the package is checked by a test: keys and
// operations above, the other values below.
func TestEveryExportedConstantIsChecked(t *testing.T) {
	others := map[string]bool{
		"ConventionsVersion": true, "ToolTypeFunction": true, "ToolTypeExtension": true,
		"ToolTypeDatastore": true, "ProviderOpenAI": true, "ProviderGCPGenAI": true,
		"ProviderAnthropic": true, "NetworkTransportTCP": true, "NetworkTransportPipe": true,
	}
	for _, name := range exportedConsts(t) {
		_, isKey := exportedKeys[name]
		_, isOp := exportedOperations[name]
		assert.True(t, isKey || isOp || others[name], "exported constant %s is not checked against the pinned conventions", name)
	}
}

// The pin the header names is the one the package states.
func TestConventionsVersionMatchesTestdata(t *testing.T) {
	p := readPinned(t)
	assert.Contains(t, p.header, "model/gen-ai/registry.yaml  @ "+ConventionsVersion+"  (pinned)")
	assert.Len(t, ConventionsVersion, 40, "a full commit hash")
}

func TestValues(t *testing.T) {
	// Values the conventions list as members or examples.
	assert.Equal(t, "openai", ProviderOpenAI)
	assert.Equal(t, "gcp.gen_ai", ProviderGCPGenAI)
	assert.Equal(t, "anthropic", ProviderAnthropic)
	assert.Equal(t, []string{"function", "extension", "datastore"}, []string{ToolTypeFunction, ToolTypeExtension, ToolTypeDatastore})
	assert.Equal(t, []string{"tcp", "pipe"}, []string{NetworkTransportTCP, NetworkTransportPipe})
}

// fill replaces each {attribute} of a pinned span-name format.
func fill(format string, values map[string]string) string {
	for k, v := range values {
		format = strings.ReplaceAll(format, "{"+k+"}", v)
	}
	return format
}

func TestSpanNamesFollowPinnedFormats(t *testing.T) {
	p := readPinned(t)
	assert.Equal(t, fill(p.spans["gen_ai.inference.client"], map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}), SpanName(OperationChat, "gpt-4o"))
	assert.Equal(t, "chat gpt-4o", ChatSpanName("gpt-4o"))
	assert.Equal(t, fill(p.spans["gen_ai.invoke_agent.internal"], map[string]string{"gen_ai.agent.name": "planner"}), InvokeAgentSpanName("planner"))
	assert.Equal(t, fill(p.spans["gen_ai.execute_tool.internal"], map[string]string{"gen_ai.tool.name": "search"}), ExecuteToolSpanName("search"))
	assert.Equal(t, fill(p.spans["mcp.client"], map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "search"}), SpanName("tools/call", "search"))
	// No target: the operation alone, as the conventions say for an
	// unnamed agent or a method without a low-cardinality target.
	assert.Equal(t, "invoke_agent", InvokeAgentSpanName(""))
	assert.Equal(t, "tools/list", SpanName("tools/list", ""))
}

func TestAttributeHelpers(t *testing.T) {
	assert.Equal(t, []attribute.KeyValue{
		OperationNameKey.String("chat"), ProviderNameKey.String("openai"), RequestModelKey.String("gpt-4o"),
	}, ChatAttributes(ProviderOpenAI, "gpt-4o"))
	assert.Equal(t, []attribute.KeyValue{OperationNameKey.String("chat")}, ChatAttributes("", ""))
	assert.Equal(t, []attribute.KeyValue{
		OperationNameKey.String("invoke_agent"), ProviderNameKey.String("openai"), AgentNameKey.String("planner"),
	}, InvokeAgentAttributes(ProviderOpenAI, "planner"))
	assert.Equal(t, []attribute.KeyValue{OperationNameKey.String("invoke_agent")}, InvokeAgentAttributes("", ""))
	assert.Equal(t, []attribute.KeyValue{
		OperationNameKey.String("execute_tool"), ToolNameKey.String("search"),
		ToolCallIDKey.String("call_1"), ToolTypeKey.String("function"),
	}, ExecuteToolAttributes("search", "call_1", ToolTypeFunction))
	assert.Equal(t, []attribute.KeyValue{
		OperationNameKey.String("execute_tool"), ToolNameKey.String("search"),
	}, ExecuteToolAttributes("search", "", ""))
}

func TestToolCallContext(t *testing.T) {
	ctx := context.Background()
	_, ok := ToolCallFromContext(ctx)
	assert.False(t, ok)
	assert.Equal(t, ctx, ContextWithToolCall(ctx, ToolCall{Name: "search"}), "no span, nothing stored")
	// A non-recording span is carried but not returned.
	ctx2 := ContextWithToolCall(ctx, ToolCall{Span: trace.SpanFromContext(ctx), Name: "search"})
	_, ok = ToolCallFromContext(ctx2)
	assert.False(t, ok, "a no-op span is nothing to add attributes to")
	ctx3 := ContextWithToolCall(ctx, ToolCall{Span: recording{}, Name: "search", CallID: "call_1"})
	tc, ok := ToolCallFromContext(ctx3)
	require.True(t, ok)
	assert.Equal(t, "search", tc.Name)
	assert.Equal(t, "call_1", tc.CallID)
}

// recording is a span that says it records (the API has no recording span
// without an SDK).
type recording struct{ noop.Span }

func (recording) IsRecording() bool { return true }
