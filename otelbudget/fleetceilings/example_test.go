package fleetceilings_test

import (
	"fmt"

	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// Parse reads the body a server pushes under "deadline.ceilings";
// a body of another schema is refused with a message naming the field.
func ExampleParse() {
	c, err := fleetceilings.Parse([]byte(`{"schema":"deadline.fleet.ceilings/v1","service":"checkout",
		"steps":{"fetch":{"ceiling_ms":123.4,"estimate_ms":102.8,"quantile":0.99,"margin":1.2,"samples":5000,"censored":120}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Service, c.Steps["fetch"].Ceiling(), c.Steps["fetch"].Samples)

	_, err = fleetceilings.Parse([]byte(`{"schema":"deadline.fleet.ceilings/v2"}`))
	fmt.Println(err)
	// Output:
	// checkout 123.4ms 5000
	// fleetceilings: invalid ceilings body: schema "deadline.fleet.ceilings/v2": want exactly "deadline.fleet.ceilings/v1"
}
