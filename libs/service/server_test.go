package service_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/service"
)

type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

type task struct {
	name string
	rec  *recorder
}

func (t task) Start(context.Context) error { t.rec.add("start " + t.name); return nil }
func (t task) Stop(context.Context) error  { t.rec.add("stop " + t.name); return nil }

// What a server opened last stops first: a loop or task before the pool
// it uses, and a second Close does nothing.
func TestCloseRunsStepsNewestFirst(t *testing.T) {
	rec := &recorder{}
	srv := service.NewServer(slog.New(slog.DiscardHandler))
	srv.OnClose("pool", func() error { rec.add("close pool"); return nil })
	if err := srv.Start(t.Context(), "jobs", time.Second, task{"jobs", rec}); err != nil {
		t.Fatal(err)
	}
	srv.Go(t.Context(), "loop", time.Second, func(ctx context.Context) {
		<-ctx.Done()
		rec.add("loop returned")
	})
	srv.Close()
	srv.Close()
	want := []string{"start jobs", "loop returned", "stop jobs", "close pool"}
	if !slices.Equal(rec.steps, want) {
		t.Fatalf("steps %q, want %q", rec.steps, want)
	}
}

// A loop that ignores its cancellation holds Close for its budget only,
// and says so; a failing step is logged and the rest still run.
func TestCloseLeavesALoopPastItsBudget(t *testing.T) {
	var logs bytes.Buffer
	srv := service.NewServer(slog.New(slog.NewTextHandler(&logs, nil)))
	closed := false
	srv.OnClose("pool", func() error { closed = true; return nil })
	srv.OnClose("kafka", func() error { return errors.New("broker gone") })
	release := make(chan struct{})
	defer close(release)
	srv.Go(t.Context(), "stubborn loop", 50*time.Millisecond, func(context.Context) { <-release })
	srv.Close()
	if !closed {
		t.Fatal("the pool was not closed after a loop past its budget")
	}
	for _, want := range []string{"stubborn loop did not stop within its budget", "closing kafka", "broker gone"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// A task that fails to start is not stopped by Close.
func TestStartFailure(t *testing.T) {
	srv := service.NewServer(slog.New(slog.DiscardHandler))
	if err := srv.Start(t.Context(), "jobs", time.Second, failing{}); err == nil {
		t.Fatal("Start returned no error")
	}
	srv.Close() // would panic in failing.Stop
}

type failing struct{}

func (failing) Start(context.Context) error { return errors.New("no") }
func (failing) Stop(context.Context) error  { panic("stopped a task that never started") }
