package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/cmd/internal/platform/redistest"
)

func TestCountGetPlansCallsSumsEveryOutcomeOfTheRoute(t *testing.T) {
	// The lines as the catalogue's /metrics writes them.
	const metrics = `# TYPE http_server_request_duration_seconds histogram
http_server_request_duration_seconds_bucket{http_request_method="POST",http_response_status_code="200",http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlans",otel_scope_name="x",le="0.005"} 40
http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlans",otel_scope_name="x"} 41
http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="500",http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlans",otel_scope_name="x"} 2
http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlan",otel_scope_name="x"} 1000
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(metrics))
	}))
	defer srv.Close()
	got, err := countGetPlansCalls(context.Background(), srv.URL)
	if err != nil || got != 43 {
		t.Fatalf("countGetPlansCalls = %v, %v; want 43 (41 + 2, GetPlan not counted)", got, err)
	}
	if _, err := countGetPlansCalls(context.Background(), srv.URL+"/nowhere"); err == nil {
		t.Fatal("a 404 from /metrics was read as a count")
	}
}

func TestCountRedisScriptCallsCountsEvalAndEvalsha(t *testing.T) {
	ctx := context.Background()
	opts, err := goredis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	before, err := countRedisScriptCalls(ctx, rdb)
	if err != nil {
		t.Fatalf("redis at %s: %v", opts.Addr, err)
	}
	// Run resolves a script by EVALSHA and falls back to EVAL when Redis
	// does not know it yet: either way, one run.
	script := goredis.NewScript("return 1")
	for range 3 {
		if err := script.Run(ctx, rdb, nil).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Get(ctx, "bench-count-test").Err(); err != nil && err != goredis.Nil {
		t.Fatal(err)
	}
	after, err := countRedisScriptCalls(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	// Other tests may run scripts on the same server meanwhile: at least
	// ours are counted, and the GET is not a script.
	if after-before < 3 {
		t.Fatalf("script calls rose by %v; want at least 3", after-before)
	}
}
