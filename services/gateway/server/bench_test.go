package server_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// BenchmarkGetPlan measures GET /v1/plans/{id} through the whole read path:
// real key, auth cache and rate limiter in Redis, Twirp to the catalogue,
// Postgres. `make bench` compares the same path against a bare handler.
func BenchmarkGetPlan(b *testing.B) {
	p := start(b, options{defaultRateLimit: 1 << 30})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	var list planList
	p.get("/v1/plans?limit=1", bearer(key)).json(b, &list)
	if len(list.Data) != 1 {
		b.Fatal("no plan")
	}
	url := p.gateway + "/v1/plans/" + list.Data[0].ID
	getInParallel(b, url, key)
}

// BenchmarkGetOrder measures GET /v1/orders/{id} through the whole read
// path: auth, rate limit, Twirp to ordering, its Postgres reads.
func BenchmarkGetOrder(b *testing.B) {
	p := start(b, options{defaultRateLimit: 1 << 30})
	pt := p.partner("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX, 100_00)
	var list planList
	p.get("/v1/plans?limit=1&type=fixed", bearer(pt.key)).json(b, &list)
	var created struct{ Data orderJSON }
	pt.order("bench", orderBody(list.Data[0].ID, "")).json(b, &created)
	url := p.gateway + "/v1/orders/" + created.Data.ID
	getInParallel(b, url, pt.key)
}

// getInParallel GETs url with key from enough concurrent clients to keep
// both cores busy across the hops, each answer read whole.
func getInParallel(b *testing.B, url, key string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Enough concurrent clients to keep both cores busy across the hops.
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
			req.Header.Set("Authorization", bearer(key))
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
