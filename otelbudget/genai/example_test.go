package genai_test

import (
	"fmt"

	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// The span name and start attributes of a model call and a tool call, as an
// integration sets them.
func Example() {
	fmt.Println(genai.ChatSpanName("gpt-4o"))
	for _, kv := range genai.ChatAttributes(genai.ProviderOpenAI, "gpt-4o") {
		fmt.Println(kv.Key, "=", kv.Value.AsString())
	}
	fmt.Println(genai.ExecuteToolSpanName("search"))
	fmt.Println(genai.InvokeAgentSpanName("planner"))
	// Output:
	// chat gpt-4o
	// gen_ai.operation.name = chat
	// gen_ai.provider.name = openai
	// gen_ai.request.model = gpt-4o
	// execute_tool search
	// invoke_agent planner
}
