// Package budgetopamp brings a fleet's ceilings to a client process over
// OpAMP, the OpenTelemetry protocol for managing telemetry agents.
//
// The deadline connector (a Collector component) learns, per service and
// step, the ceilings the whole fleet's attempts suggest; an OpAMP server
// pushes them to each client as remote configuration: one AgentConfigMap
// entry, [ConfigKey] "deadline.ceilings", content type "application/json",
// whose body is a [Ceilings] document of schema [Schema]. This package
// holds that body's types ([Ceilings], [StepCeiling], [ParseCeilings]).
//
// docs/ceilings.md ("Clients: fleet ceilings over OpAMP") describes the
// loop. The package is its own module, so that programs that do not use
// OpAMP never download opamp-go.
package budgetopamp
