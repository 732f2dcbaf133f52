package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/coalesce"
)

type ctxKey struct{}

// TestAloneWhenIdleOnTheCallersContext: with a free slot a call goes out by
// itself, carrying the caller's context (values and cancellation).
func TestAloneWhenIdleOnTheCallersContext(t *testing.T) {
	var sizes []int
	b := coalesce.New(func(ctx context.Context, in []int) ([]string, error) {
		sizes = append(sizes, len(in))
		if ctx.Value(ctxKey{}) != "caller" {
			return nil, errors.New("context values lost")
		}
		if ctx.Done() == nil {
			return nil, errors.New("caller's cancellation lost")
		}
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = fmt.Sprint(v * 10)
		}
		return out, nil
	}, coalesce.Options{})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "caller"))
	defer cancel()
	for i := range 3 {
		got, err := b.Do(ctx, i)
		if err != nil || got != fmt.Sprint(i*10) {
			t.Fatalf("Do(%d) = %q, %v", i, got, err)
		}
	}
	if fmt.Sprint(sizes) != "[1 1 1]" {
		t.Fatalf("batch sizes %v, want three batches of one", sizes)
	}
}

// TestQueuedCallsShareOneBatch: while the only slot is busy, calls queue and
// go out together when it frees, each getting its own answer.
func TestQueuedCallsShareOneBatch(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(in))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * v
		}
		return out, nil
	}, coalesce.Options{MaxInFlight: 1, MaxBatch: 10})

	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	do := func(v int) {
		defer wg.Done()
		got, err := b.Do(ctx, v)
		if err != nil || got != v*v {
			errs <- fmt.Errorf("Do(%d) = %d, %v", v, got, err)
		}
	}
	wg.Add(1)
	go do(1)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	for v := 2; v <= 13; v++ {
		wg.Add(1)
		go do(v)
	}
	waitFor(t, func() bool { return coalesce.Queued(b) == 12 })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// 12 queued calls, at most 10 a batch: 10 then 2.
	if fmt.Sprint(sizes) != "[1 10 2]" {
		t.Fatalf("batch sizes %v, want [1 10 2]", sizes)
	}
}

// TestObserverHearsEveryBatchSent: the observer is told each batch's size,
// a send time that spans the Func, and the Func's error, a panic's
// included.
func TestObserverHearsEveryBatchSent(t *testing.T) {
	type seen struct {
		size int
		took time.Duration
		err  error
	}
	var mu sync.Mutex
	var observed []seen
	observe := func(_ context.Context, size int, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, seen{size, took, err})
	}
	release := make(chan struct{})
	started := make(chan time.Time, 1)
	boom := errors.New("backend down")
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		switch in[0] {
		case 1: // the first batch, alone: held until the others queue
			started <- time.Now()
			<-release
		case 99:
			return nil, boom
		case 98:
			panic("send blew up")
		}
		return in, nil
	}, coalesce.Options{MaxInFlight: 1, MaxBatch: 10, Observe: observe})

	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.Do(ctx, 1) })
	sent := <-started
	for v := 2; v <= 13; v++ {
		wg.Go(func() { _, _ = b.Do(ctx, v) })
	}
	waitFor(t, func() bool { return coalesce.Queued(b) == 12 })
	held := time.Since(sent)
	close(release)
	wg.Wait()
	if _, err := b.Do(ctx, 99); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if _, err := b.Do(ctx, 98); !errors.Is(err, coalesce.ErrPanicked) {
		t.Fatalf("err = %v, want ErrPanicked", err)
	}

	mu.Lock()
	defer mu.Unlock()
	var sizes []int
	for _, o := range observed {
		sizes = append(sizes, o.size)
	}
	if fmt.Sprint(sizes) != "[1 10 2 1 1]" {
		t.Fatalf("observed batch sizes %v, want [1 10 2 1 1]", sizes)
	}
	if observed[0].took < held {
		t.Errorf("first batch took %v by the observer, but its Func was held for at least %v", observed[0].took, held)
	}
	for i, o := range observed[:3] {
		if o.err != nil {
			t.Errorf("batch %d observed with error %v", i, o.err)
		}
	}
	if !errors.Is(observed[3].err, boom) {
		t.Errorf("failed batch observed with %v, want %v", observed[3].err, boom)
	}
	var pe *coalesce.PanicError
	if !errors.As(observed[4].err, &pe) {
		t.Errorf("panicked batch observed with %v, want a *PanicError", observed[4].err)
	}
}

// TestBatchErrorFailsEveryCall and a wrong-sized answer is an error, not a
// mismatched result.
func TestBatchErrorFailsEveryCall(t *testing.T) {
	boom := errors.New("backend down")
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) { return nil, boom }, coalesce.Options{})
	if _, err := b.Do(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	short := coalesce.New(func(ctx context.Context, in []int) ([]int, error) { return []int{}, nil }, coalesce.Options{})
	if _, err := short.Do(context.Background(), 1); !errors.Is(err, coalesce.ErrBatchSize) {
		t.Fatalf("err = %v, want ErrBatchSize", err)
	}
}

// TestCallerThatGivesUpReturnsAtOnceAndIsNotSent: a queued caller whose
// context ends returns its own error without waiting, and the batch that
// follows does not carry its input; a batch of several callers survives
// the first caller's cancellation.
func TestCallerThatGivesUpReturnsAtOnceAndIsNotSent(t *testing.T) {
	release := make(chan struct{})
	var sent [][]int
	var mu sync.Mutex
	var batchCtxErr atomic.Value
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		mu.Lock()
		sent = append(sent, append([]int(nil), in...))
		n := len(sent)
		mu.Unlock()
		if n == 1 {
			<-release
		}
		if n == 2 {
			time.Sleep(20 * time.Millisecond)
			batchCtxErr.Store(fmt.Sprint(ctx.Err()))
		}
		return in, nil
	}, coalesce.Options{MaxInFlight: 1})

	bg := context.Background()
	go func() { _, _ = b.Do(bg, 0) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sent) == 1 })

	gone, cancelGone := context.WithCancel(bg)
	first, cancelFirst := context.WithCancel(bg)
	type result struct {
		v   int
		err error
	}
	goneDone, firstDone, lastDone := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go func() { v, err := b.Do(gone, 1); goneDone <- result{v, err} }()
	waitFor(t, func() bool { return coalesce.Queued(b) == 1 })
	go func() { v, err := b.Do(first, 2); firstDone <- result{v, err} }()
	waitFor(t, func() bool { return coalesce.Queued(b) == 2 })
	go func() { v, err := b.Do(bg, 3); lastDone <- result{v, err} }()
	waitFor(t, func() bool { return coalesce.Queued(b) == 3 })

	cancelGone()
	select {
	case r := <-goneDone:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled caller got %v, %v", r.v, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled caller still waiting")
	}
	close(release)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sent) == 2 })
	cancelFirst() // while its batch is in flight
	if r := <-lastDone; r.err != nil || r.v != 3 {
		t.Fatalf("last caller: %v, %v", r.v, r.err)
	}
	<-firstDone
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sent[1]) != "[2 3]" {
		t.Fatalf("second batch sent %v, want [2 3] (the cancelled call left out)", sent[1])
	}
	if got := batchCtxErr.Load(); got != "<nil>" {
		t.Fatalf("shared batch's context ended with its first caller: %v", got)
	}
}

// TestReleasesTheSlotWhenSendPanics: a panic in a call sent alone, on the
// caller's goroutine, is the caller's error (not a panic) and does not leak
// the slot.
func TestReleasesTheSlotWhenSendPanics(t *testing.T) {
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		if in[0] < 0 {
			panic("negative")
		}
		return in, nil
	}, coalesce.Options{MaxInFlight: 1})
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Errorf("Do re-panicked with %v; want an error", v)
			}
		}()
		_, err := b.Do(context.Background(), -1)
		var pe *coalesce.PanicError
		if !errors.Is(err, coalesce.ErrPanicked) || !errors.As(err, &pe) || pe.Value != "negative" {
			t.Errorf("err = %v, want a PanicError of \"negative\"", err)
		}
	}()
	done := make(chan error, 1)
	go func() { _, err := b.Do(context.Background(), 1); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("slot leaked by the panic: the next call never went out")
	}
}

// inChild runs the calling test again in a child process (the test binary
// with childEnv set) and fails if the child fails or crashes: a panic on
// the batcher's own goroutine kills the whole process, which no recover in
// the test can catch. It reports whether this is the child, which then
// runs the body.
func inChild(t *testing.T) bool {
	t.Helper()
	const childEnv = "COALESCE_TEST_CHILD"
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process failed (%v); the process must survive the panic:\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child process did not run the test:\n%s", out)
	}
	return false
}

// TestPanicInQueuedBatchFailsItsCalls: a panic in a batch of queued calls,
// sent on the batcher's goroutine, neither kills the process nor strands a
// caller: every call in the batch gets ErrPanicked with the panic's value,
// the slot is freed, and later calls go through.
func TestPanicInQueuedBatchFailsItsCalls(t *testing.T) {
	if !inChild(t) {
		return
	}
	testQueuedBatchEndsAbnormally(t, func() { panic("boom") }, "boom")
}

// TestGoexitInQueuedBatchFailsItsCalls: runtime.Goexit (t.FailNow in a
// fake, say) unwinds past any recover; its callers are answered all the
// same.
func TestGoexitInQueuedBatchFailsItsCalls(t *testing.T) {
	if !inChild(t) {
		return
	}
	testQueuedBatchEndsAbnormally(t, runtime.Goexit, "runtime.Goexit called")
}

func testQueuedBatchEndsAbnormally(t *testing.T, fail func(), wantValue any) {
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), in...))
		n := len(batches)
		mu.Unlock()
		switch n {
		case 1:
			<-release
		case 2:
			fail()
		}
		return in, nil
	}, coalesce.Options{MaxInFlight: 1})

	ctx := context.Background()
	type result struct {
		v   int
		err error
	}
	firstDone := make(chan result, 1)
	go func() { v, err := b.Do(ctx, 1); firstDone <- result{v, err} }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 })
	queued := make(chan result, 2)
	for v := 2; v <= 3; v++ {
		go func() { v, err := b.Do(ctx, v); queued <- result{v, err} }()
	}
	waitFor(t, func() bool { return coalesce.Queued(b) == 2 })
	close(release)

	if r := <-firstDone; r.err != nil || r.v != 1 {
		t.Fatalf("slot holder: %v, %v", r.v, r.err)
	}
	for range 2 {
		select {
		case r := <-queued:
			var pe *coalesce.PanicError
			if !errors.Is(r.err, coalesce.ErrPanicked) || !errors.As(r.err, &pe) || pe.Value != wantValue {
				t.Fatalf("queued call in the failed batch: %v, %v; want ErrPanicked with %v", r.v, r.err, wantValue)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a queued call of the failed batch was never answered")
		}
	}
	mu.Lock()
	slices.Sort(batches[1]) // queued concurrently, in either order
	if fmt.Sprint(batches) != "[[1] [2 3]]" {
		t.Fatalf("batches %v, want [[1] [2 3]]", batches)
	}
	mu.Unlock()

	done := make(chan result, 1)
	go func() { v, err := b.Do(ctx, 4); done <- result{v, err} }()
	select {
	case r := <-done:
		if r.err != nil || r.v != 4 {
			t.Fatalf("call after the failed batch: %v, %v", r.v, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("slot leaked by the failed batch: the next call never went out")
	}
}

func TestEveryCallAnsweredUnderConcurrency(t *testing.T) {
	var batches, items atomic.Int64
	b := coalesce.New(func(ctx context.Context, in []int) ([]int, error) {
		batches.Add(1)
		items.Add(int64(len(in)))
		time.Sleep(time.Millisecond)
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = -v
		}
		return out, nil
	}, coalesce.Options{MaxInFlight: 2, MaxBatch: 16})
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v := w*1000 + i
				if got, err := b.Do(context.Background(), v); err != nil || got != -v {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d calls got a wrong answer", wrong.Load())
	}
	if items.Load() != 32*50 {
		t.Fatalf("sent %d inputs, want %d", items.Load(), 32*50)
	}
	if batches.Load() >= items.Load() {
		t.Fatalf("%d batches for %d inputs: nothing was coalesced", batches.Load(), items.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
