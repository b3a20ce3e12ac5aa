// Package agenttest is the test scaffolding of the agent-framework
// integrations, written once: a fake OpenAI-compatible provider
// ([Provider], served on loopback by httptest or in memory by
// [MemTransport] inside a testing/synctest bubble), the span collection
// ([NewRecorder]), the pinned GenAI registry ([ReadRegistry]) and the
// canonical dump of an agent run's spans ([Shape]) that both frameworks'
// tests compare with one golden file (testdata/shape.golden).
//
// It is a tests-only module (versions.yaml, excluded-modules): the test
// modules of otelbudgeteino and otelbudgetgenkit and examples/agentdemo
// import it; nothing published does.
package agenttest
