// Package sdktest runs the LLM providers' real Go SDKs (openai-go and
// anthropic-sdk-go) over deadlinehttp.Transport, against local fake
// provider servers that answer the way the providers do: 429 with
// retry-after-ms, x-should-retry true and false, 529, a streamed completion
// that stalls, a budget below the floor. It is a module of its own so that
// the root module never requires an SDK; it holds tests only, and the
// example that docs/agents.md shows.
package sdktest
