// Package budgetopamp brings a fleet's ceilings to a client process over
// OpAMP, the OpenTelemetry protocol for managing telemetry agents, without
// a file and without a restart.
//
// The deadline connector (a Collector component) learns, per service and
// step, the ceilings the whole fleet's attempts suggest; an OpAMP server
// pushes them to each client as remote configuration: one AgentConfigMap
// entry, [ConfigKey] "deadline.ceilings", content type "application/json",
// whose body is a [Ceilings] document of schema [Schema] ([ParseCeilings]
// reads it). [Start] runs opamp-go's client, which identifies the process
// by its service.name and applies each body to a [Sink], the process's
// [learn.Live]: a step with too few samples of its own serves the fleet's
// ceiling at once, its own samples take over once they suffice, and the
// fleet never raises a ceiling beyond the Live's Max.
//
//	var rec learn.Recorder
//	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 2 * time.Second}})
//	client, err := budgetopamp.Start(ctx, "ws://collector:4320/v1/opamp", live, budgetopamp.WithServiceName("checkout"))
//	defer client.Stop(ctx)
//	policy.Ceiling = live
//	policy.Hooks = deadline.Compose(obs.Hooks(), rec.Hooks())
//
// docs/ceilings.md ("Clients: fleet ceilings over OpAMP") describes the
// loop and its faults. The package is its own module, so that programs that
// do not use OpAMP never download opamp-go.
package budgetopamp
