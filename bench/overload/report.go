package overload

// Report is what TestOverloadReport writes for cmd/compare: the models, the
// seeds and loads run, the rows (name and configuration), and one Result
// per seed, load and row of the one-route model (Results) and of the
// two-route model (TwoRoutes, at TwoRouteLoads).
type Report struct {
	Model, TwoRouteModel       string
	Capacity, TwoRouteCapacity float64
	Seeds                      []uint64
	Loads, TwoRouteLoads       []float64
	Short                      bool
	Rows                       []RowInfo
	Results, TwoRoutes         []Result
	// Wall is the wall time of the whole report, in seconds.
	Wall float64
}

// RowInfo is a row's name and configuration.
type RowInfo struct{ Name, Config string }

// Seeds are the seeds of the published run.
var Seeds = []uint64{20261202, 20261203, 20261204}

// Loads are the overload levels of the one-route model, in multiples of
// capacity.
var Loads = []float64{1, 2, 5, 10}

// TwoRouteLoads are the overload levels of the two-route model.
var TwoRouteLoads = []float64{5}
