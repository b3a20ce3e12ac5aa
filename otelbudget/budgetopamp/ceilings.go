package budgetopamp

import "github.com/deadlinebudget/budget/otelbudget/fleetceilings"

// The body's wire schema lives in [fleetceilings], a package of the root
// module with no dependency beyond the standard library, which the
// Collector side imports too; these names are the same.
const (
	// ConfigKey is the AgentConfigMap key of the ceilings.
	ConfigKey = fleetceilings.ConfigKey
	// ContentType is the content type of the ceilings' config file.
	ContentType = fleetceilings.ContentType
	// Schema is the only schema version read or written.
	Schema = fleetceilings.Schema
	// TimeLayout is how the body's times are written.
	TimeLayout = fleetceilings.TimeLayout
)

// ErrInvalidBody is matched (errors.Is) by every error of [ParseCeilings]
// and by a client's refusal of a body.
var ErrInvalidBody = fleetceilings.ErrInvalidBody

// BodyError is a ceilings body refused: [fleetceilings.BodyError].
type BodyError = fleetceilings.BodyError

// Ceilings is the body of the fleet's ceilings: [fleetceilings.Ceilings].
type Ceilings = fleetceilings.Ceilings

// StepCeiling is one step's suggested ceiling: [fleetceilings.StepCeiling].
type StepCeiling = fleetceilings.StepCeiling

// ParseCeilings reads and checks a ceilings body: [fleetceilings.Parse].
func ParseCeilings(body []byte) (Ceilings, error) { return fleetceilings.Parse(body) }
