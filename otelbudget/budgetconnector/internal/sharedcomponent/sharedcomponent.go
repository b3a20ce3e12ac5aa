// Package sharedcomponent keeps one instance of a component for every
// pipeline that uses it, as the Collector's and contrib's internal packages
// of that name do: a connector in a traces and a metrics pipeline is
// created twice by the Collector, once per pipeline, and started and shut
// down once per pipeline, but is one instance with one state.
//
// The first Start starts the instance; the last Shutdown (one per Start)
// shuts it down and forgets it, so that the next creation under the same
// key (a reloaded configuration) makes a new one. A Shutdown with no Start
// before it (the Collector shuts every component down when another fails
// to start) shuts the instance down too; the instance's Shutdown must then
// accept not having started, as every component's must.
package sharedcomponent

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// ErrShutDown is returned by Start once the instance has been shut down:
// it is not started again (a new one is created under its key instead).
var ErrShutDown = errors.New("sharedcomponent: the component has been shut down")

// Map holds the shared instances by key (a component.ID, usually). Its zero
// value is ready to use; it must not be copied after first use.
type Map[K comparable, V component.Component] struct {
	mu         sync.Mutex
	components map[K]*Component[V]
}

// LoadOrStore returns the instance under key, made by create if there is
// none. An error of create is returned as is, and nothing is stored.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.components[key]; ok {
		return c, nil
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[V]{component: v}
	c.remove = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.components[key] == c {
			delete(m.components, key)
		}
	}
	if m.components == nil {
		m.components = map[K]*Component[V]{}
	}
	m.components[key] = c
	return c, nil
}

// Len is the number of instances held: created and not yet shut down.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.components)
}

// Component is one shared instance: Start and Shutdown as a
// component.Component, counted across its users.
type Component[V component.Component] struct {
	component V
	remove    func()

	mu      sync.Mutex
	started int  // Starts not yet matched by a Shutdown
	down    bool // shut down: for good
}

var _ component.Component = (*Component[component.Component])(nil)

// Unwrap returns the instance.
func (c *Component[V]) Unwrap() V { return c.component }

// Start starts the instance on the first call; later calls only count a
// user. A failed start is not counted: the error is returned and the next
// Start tries again. Once shut down, Start returns ErrShutDown.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return ErrShutDown
	}
	if c.started == 0 {
		if err := c.component.Start(ctx, host); err != nil {
			return err
		}
	}
	c.started++
	return nil
}

// Shutdown counts a user out; the last one (or one with no Start before
// it) shuts the instance down, returns its error and removes it from its
// Map. Later calls return nil.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil
	}
	if c.started > 1 {
		c.started--
		return nil
	}
	c.started, c.down = 0, true
	defer c.remove()
	return c.component.Shutdown(ctx)
}
