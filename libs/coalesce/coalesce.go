// Package coalesce merges concurrent calls to a backend into batches, so
// that under load one round trip serves many callers.
//
// It batches "naturally": a call made while a slot is free goes out at
// once, alone, on the caller's own context; calls made while every slot is
// busy queue, and the first slot to free up takes them all (up to MaxBatch)
// in one batch. Nothing waits on a timer, so light traffic sees no added
// latency and batches grow only as fast as load does. Timer-window loaders
// (graph-gophers/dataloader and the like) make every call wait for the
// window instead, and cache results, which a read of live data must not.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Func sends one batch. It answers one output per input, in order; an error
// fails every call in the batch. Per-item failures belong in Out.
type Func[In, Out any] func(ctx context.Context, batch []In) ([]Out, error)

// Options bound the batches.
type Options struct {
	// MaxBatch caps the inputs sent in one batch (default 64).
	MaxBatch int
	// MaxInFlight caps the batches outstanding at once (default 4). Calls
	// beyond it queue, and the queue is what batches.
	MaxInFlight int
	// Observe, when set, hears of every batch sent, once its calls are
	// answered. Batch sizes and send times are what an operator needs to
	// see of a batcher: how much load is being shared, and which backend
	// is slow.
	Observe Observer
}

// Observer is told of one batch sent: how many calls it carried, how long
// its Func took and what it returned (a *PanicError when it panicked). It
// runs on the batch's goroutine before the next queued batch goes out, so
// it must be quick, as recording a metric is.
type Observer func(ctx context.Context, size int, took time.Duration, err error)

// Batcher coalesces calls of one kind. Its zero value is not usable; use
// New.
type Batcher[In, Out any] struct {
	send        Func[In, Out]
	maxBatch    int
	maxInFlight int
	observe     Observer

	mu       sync.Mutex
	inFlight int
	// queue is non-empty only while every slot is busy: a freed slot takes it.
	queue []*call[In, Out]
}

type call[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

// New returns a batcher that sends through send.
func New[In, Out any](send Func[In, Out], opts Options) *Batcher[In, Out] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 4
	}
	return &Batcher[In, Out]{send: send, maxBatch: opts.MaxBatch, maxInFlight: opts.MaxInFlight, observe: opts.Observe}
}

// ErrBatchSize reports a Func that answered the wrong number of outputs.
var ErrBatchSize = errors.New("coalesce: batch answered a different number of outputs than inputs")

// ErrPanicked reports a Func that panicked (or exited its goroutine) while
// sending a batch. Every call in that batch fails with a *PanicError, which
// wraps it.
var ErrPanicked = errors.New("coalesce: send panicked")

// PanicError is the error of every call in a batch whose Func panicked. It
// carries the panic's value and the stack where it was recovered, for the
// caller to log.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanicked, e.Value) }

// Unwrap makes errors.Is(err, ErrPanicked) hold, and reaches the panic's
// value when that is itself an error.
func (e *PanicError) Unwrap() []error {
	if v, ok := e.Value.(error); ok {
		return []error{ErrPanicked, v}
	}
	return []error{ErrPanicked}
}

// Do sends in, alone or with other calls, and returns its output. A caller
// whose ctx ends stops waiting at once with ctx's error; the batch it joined
// still goes out for the others.
//
// A panic in the Func never leaves Do: every call of the batch gets a
// *PanicError (errors.Is ErrPanicked) and the slot is freed. That holds on
// both paths, the caller's own goroutine (a call sent alone while a slot was
// free) and the batcher's (queued calls): whether a call goes out alone or
// queued depends only on load, so re-panicking on one path and returning an
// error on the other would make the same fault crash a caller's goroutine
// when idle and return an error when busy. On the batcher's goroutine
// nothing above run could recover it, and a panic there killed the process.
func (b *Batcher[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	var zero Out
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}

	b.mu.Lock()
	if b.inFlight < b.maxInFlight {
		// A free slot means an empty queue: go now, alone, on the caller's
		// goroutine and context, as if there were no batcher.
		b.inFlight++
		b.mu.Unlock()
		b.run([]*call[In, Out]{c})
		return c.out, c.err
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// run sends batch, answers its calls and hands the slot to the queue. It
// never panics: a panicking Func fails the batch's calls instead (see Do).
func (b *Batcher[In, Out]) run(batch []*call[In, Out]) {
	// Deferred so that a panicking Func cannot leak the slot and, slot by
	// slot, stop the batcher.
	defer b.release()

	// Callers that gave up while queued are not sent for.
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if batch = live; len(batch) == 0 {
		return
	}

	ctx := batch[0].ctx
	if len(batch) > 1 {
		// The batch serves callers that may give up one by one; it keeps the
		// first caller's values (trace, request id) but none's cancellation.
		// Its deadline is the backend client's own timeout.
		ctx = context.WithoutCancel(ctx)
	}
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}

	var outs []Out
	var err error
	returned := false
	start := time.Now()
	// Answers the calls however send ends: returning, panicking, or calling
	// runtime.Goexit, which unwinds the goroutine whatever recover does.
	// Deferred after release, so it runs first: callers are answered before
	// the slot moves on.
	defer func() {
		if !returned {
			v := recover()
			if v == nil {
				// Only Goexit unwinds without a panic value (since Go 1.21
				// panic(nil) panics with *runtime.PanicNilError).
				v = "runtime.Goexit called"
			}
			outs, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
		if err == nil && len(outs) != len(batch) {
			err = fmt.Errorf("%w: %d inputs, %d outputs", ErrBatchSize, len(batch), len(outs))
		}
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.out = outs[i]
			}
			close(c.done)
		}
		if b.observe != nil {
			b.observe(ctx, len(batch), time.Since(start), err)
		}
	}()
	outs, err = b.send(ctx, ins)
	returned = true
}

// release frees a slot, or passes it straight to the queued calls.
func (b *Batcher[In, Out]) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	n := min(len(b.queue), b.maxBatch)
	next := b.queue[:n:n]
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	b.mu.Unlock()
	go b.run(next)
}
