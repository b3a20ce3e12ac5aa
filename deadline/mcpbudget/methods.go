package mcpbudget

import "strings"

// Notification reports whether method is a notification
// ("notifications/…"): it is sent and received as it is, without a budget
// or a policy, and never refused.
func Notification(method string) bool { return strings.HasPrefix(method, "notifications/") }

// Handshake reports whether method opens a session (initialize,
// server/discover): it gets [deadline.DefaultPolicy], not the policy meant
// for the session's requests, so that a ceiling meant for tool calls
// cannot make the connection fail.
func Handshake(method string) bool {
	return method == "initialize" || method == "server/discover"
}

// SafeMethod reports whether an MCP request other than tools/call only
// reads, and so may be sent more than once: server/discover, ping,
// tools/list, prompts/list, prompts/get, resources/list,
// resources/templates/list, resources/read and completion/complete.
func SafeMethod(method string) bool {
	switch method {
	case "server/discover", "ping", "tools/list", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read", "completion/complete":
		return true
	}
	return false
}

// SafeTool reports whether a tool whose annotations say readOnly and
// idempotent (its readOnlyHint and idempotentHint) may be called more than
// once: either hint is enough. A tool listed without annotations is not.
func SafeTool(readOnly, idempotent bool) bool { return readOnly || idempotent }

// CallName names a call whose policy has no name: "MCP " and the method,
// and the tool of a tools/call ("MCP tools/call search", "MCP
// tools/list"), as deadlinehttp names one "HTTP GET", so that its call span
// is told apart by name from the attempts' CLIENT spans, which MCP's
// semantic conventions name "tools/call search".
func CallName(method, tool string) string {
	if tool != "" {
		return "MCP " + method + " " + tool
	}
	return "MCP " + method
}

// Route is the name under which a server's admission learns and queues a
// request ([Admit]): the method, and for tools/call and prompts/get the
// tool's or the prompt's name ("tools/call search"). A resource's URI is
// not part of it: URIs are unbounded.
func Route(method, name string) string {
	if name != "" && (method == "tools/call" || method == "prompts/get") {
		return method + " " + name
	}
	return method
}
