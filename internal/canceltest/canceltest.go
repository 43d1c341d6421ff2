// Package canceltest makes contexts that are cancelled at a chosen point
// of the work that polls them, so that tests can stop a load, a prefill,
// a generation or a preprocessing exactly mid-way, without timing.
package canceltest

import (
	"context"
	"sync"
	"sync/atomic"
)

// Countdown is a context whose first n calls of Err return nil and every
// later one context.Canceled: it is cancelled by the poll that follows n
// polls. Done is closed when it is cancelled. It is safe for concurrent
// use.
type Countdown struct {
	context.Context
	left  atomic.Int64
	polls atomic.Int64
	done  chan struct{}
	once  sync.Once
}

// After returns a context cancelled by its (n+1)-th poll.
func After(n int) *Countdown {
	c := &Countdown{Context: context.Background(), done: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

// Err counts a poll and says whether the context is cancelled by now.
func (c *Countdown) Err() error {
	c.polls.Add(1)
	if c.left.Add(-1) >= 0 {
		return nil
	}
	c.once.Do(func() { close(c.done) })
	return context.Canceled
}

// Done is closed once a poll has cancelled the context.
func (c *Countdown) Done() <-chan struct{} { return c.done }

// Polls is how many times Err was called.
func (c *Countdown) Polls() int { return int(c.polls.Load()) }
