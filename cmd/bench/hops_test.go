package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/postgres"
	"github.com/esimplatform/esim/services/gateway/redis/redistest"
)

// The floor must do the real work of each hop: a plan the catalogue's
// database does not hold fails, so the query is not skipped.
func TestHopsFloorAnswersThroughRedisAndTheCatalogueQuery(t *testing.T) {
	ctx := context.Background()
	// The catalogue's database, migrated and seeded as the service does.
	dbURL := pgtest.NewDatabase(t)
	pool, err := libpostgres.Open(ctx, dbURL, false, postgres.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := catalogue.NewService(postgres.NewStore(pool), time.Now).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	seeded := catalogue.SeedPlans()[0].ID.String()
	body := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(body, []byte(`{"data":{"id":"x"}}`), 0o644); err != nil {
		t.Fatal(err)
	}

	back, closeBack, err := floorHandler(ctx, floorConfig{role: floorBack, body: body, dbURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer closeBack()
	backSrv := httptest.NewServer(back)
	defer backSrv.Close()
	front, closeFront, err := floorHandler(ctx, floorConfig{role: floorFront, upstream: backSrv.URL, redisURL: redistest.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFront()
	frontSrv := httptest.NewServer(front)
	defer frontSrv.Close()

	get := func(id string) (int, string) {
		resp, err := http.Get(frontSrv.URL + "/v1/plans/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, got := get(seeded); status != http.StatusOK || got != `{"data":{"id":"x"}}` {
		t.Fatalf("seeded plan: %d %q", status, got)
	}
	if status, got := get("00000000-0000-4000-8000-000000000000"); status != http.StatusBadGateway || !strings.Contains(got, "no rows") {
		t.Fatalf("unknown plan: %d %q, want the query's error", status, got)
	}
}
