package mcpbudget_test

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// What a server makes of a _meta budget value, and what a client sends.
func ExampleParse() {
	for _, v := range []any{float64(870), float64(0), 1e300, 1.5, "100"} {
		d, kind := mcpbudget.Parse(v, true)
		fmt.Println(d, kind == mcpbudget.Malformed)
	}
	fmt.Println(mcpbudget.BudgetMs(869*time.Millisecond + time.Microsecond))
	// Output:
	// 870ms false
	// 0s false
	// 2777h46m39.999s false
	// 0s true
	// 0s true
	// 870
}
