package agenttest

import (
	"os"
	"os/exec"
)

// ChildScenarioEnv is the environment variable through which [RunChild]
// tells the child process which scenario to run ([ChildScenario]).
const ChildScenarioEnv = "AGENTTEST_CHILD_SCENARIO"

// RunChild re-executes the running test binary to run only the test named
// test, with scenario in [ChildScenarioEnv], and returns its combined
// output and its exit error: a scenario that may kill its process (a
// panic on a goroutine nobody recovers) runs there, not in the test's.
func RunChild(test, scenario string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), ChildScenarioEnv+"="+scenario)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ChildScenario returns the scenario a child process was started for, ""
// in the parent (the child's test then skips).
func ChildScenario() string { return os.Getenv(ChildScenarioEnv) }
