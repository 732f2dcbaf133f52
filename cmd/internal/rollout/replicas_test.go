package rollout

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// TestTwoReplicasStartTogetherOnAFreshDatabase starts two processes of
// every service that owns a database at the same moment on a new
// database, as a Deployment's first rollout does: both must come up,
// the schema be migrated once (goose's and River's), and both answer.
func TestTwoReplicasStartTogetherOnAFreshDatabase(t *testing.T) {
	for _, s := range databaseServices(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			w, ok := workloads[s.Name]
			if !ok {
				t.Fatalf("no workload for %s: add its requests to workloads (traffic_test.go)", s.Name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			bin := currentBinary(t, s.Name)
			st := newStack(t)
			db := pgtest.NewDatabase(t)
			env := st.env(s, db) // one Deployment: the same settings and secrets
			replicas := []*replica{start(t, s.Name+"-1", bin, env), start(t, s.Name+"-2", bin, env)}

			var wg sync.WaitGroup
			errs := make([]error, len(replicas))
			for i, r := range replicas {
				wg.Go(func() { errs[i] = r.waitReady(ctx) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			checkMigratedOnce(t, ctx, s.Name, db)

			for _, r := range replicas {
				if err := w.read(ctx, st, r.url); err != nil {
					t.Errorf("%s: %v", r.name, err)
				}
				if len(w.needs) == 0 {
					if err := w.write(ctx, st, r.url); err != nil {
						t.Errorf("%s: %v", r.name, err)
					}
				}
				if exit := r.exited(); exit != "" {
					t.Error(exit)
				}
			}
		})
	}
}
