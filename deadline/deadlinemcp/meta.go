package deadlinemcp

import "github.com/deadlinebudget/budget/deadline/mcpbudget"

// MetaKey is the key under which a request's _meta carries the budget the
// caller gives the server: the attempt's lease in whole milliseconds,
// rounded up, as a JSON integer from 1 to 9999999999, e.g.
//
//	"params": {"_meta": {"io.github.deadlinebudget/budget-ms": 870}, "name": "search", …}
//
// It is [mcpbudget.MetaKey], the one key of every SDK adapter, so that a
// client on one SDK and a server on another agree. [WithMetaKey] and
// [WithInboundMetaKey] change it.
const MetaKey = mcpbudget.MetaKey

// MaxBudget is the largest budget the _meta field carries: 9999999999 ms
// (about 115.7 days), [mcpbudget.MaxBudget].
const MaxBudget = mcpbudget.MaxBudget
