package overload

// Report is what TestOverloadReport writes for cmd/compare: the seeds, and
// one Set per model and variant run.
type Report struct {
	Seeds []uint64
	Short bool
	Sets  []Set
	// Wall is the wall time of the whole report, in seconds.
	Wall float64
}

// Set is one model's runs: its description, the loads run, the rows (name
// and configuration), and one Result per seed, load and row.
type Set struct {
	// Kind says which model and variant ran: one of the Set* constants.
	Kind     string
	Model    string
	Capacity float64
	// Floor is the model's unavoidable waste: [Model.Floor] of the
	// offered calls.
	Floor   float64
	Loads   []float64
	Rows    []RowInfo
	Results []Result
}

// The sets of the report.
const (
	// SetUniform is the uniform-budget model ([Uniform]).
	SetUniform = "uniform"
	// SetDefault is issue 31's model ([Default]), its downstream finishing
	// what it started.
	SetDefault = "default"
	// SetPropagated is [Default] with the downstream honouring the
	// propagated deadline ([Model.Propagate]).
	SetPropagated = "propagated"
	// SetTwoRoutes is the two-route model ([TwoRoutes]).
	SetTwoRoutes = "two routes"
)

// RowInfo is a row's name and configuration.
type RowInfo struct{ Name, Config string }

// Seeds are the seeds of the published run.
var Seeds = []uint64{20261202, 20261203, 20261204}

// Loads are the overload levels of issue 31's model, in multiples of
// capacity.
var Loads = []float64{1, 2, 5, 10}

// PropagatedLoads are the overload levels of the propagated variant.
var PropagatedLoads = []float64{2, 5, 10}

// UniformLoads are the overload levels of the uniform-budget model.
var UniformLoads = []float64{1.2, 2, 3, 10}

// TwoRouteLoads are the overload levels of the two-route model.
var TwoRouteLoads = []float64{5}
