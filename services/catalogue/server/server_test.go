package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/server"
)

// start runs the catalogue in-process the way other services' tests do.
func start(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "catalogue", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Callers.Names()) == 0 {
		cfg.Callers = internalauthtest.Callers()
	}
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return hs
}

func TestServerServesSeededCatalogueAcrossRestarts(t *testing.T) {
	cfg := server.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true}
	ctx := context.Background()

	first := start(t, cfg)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(first.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	client := cataloguev1.NewCatalogueProtobufClient(first.URL, internalauthtest.As(first.Client(), internalauth.Operator))
	id := catalogue.SeedPlanID("jp-5gb-30d").String()
	plan, err := client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
	if err != nil {
		t.Fatalf("seeded plan: %v", err)
	}
	if _, err := client.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id}); err != nil {
		t.Fatal(err)
	}

	// A restart re-seeds the same database: nothing is duplicated, and the
	// retired plan stays retired with its original creation time.
	second := start(t, cfg)
	client = cataloguev1.NewCatalogueProtobufClient(second.URL, internalauthtest.As(second.Client(), internalauth.Operator))
	list, err := client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if int(list.Total) != len(catalogue.SeedPlans())-1 {
		t.Fatalf("after restart: %d active plans, want %d", list.Total, len(catalogue.SeedPlans())-1)
	}
	again, err := client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id, IncludeRetired: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != cataloguev1.PlanStatus_PLAN_STATUS_RETIRED || !again.CreatedAt.AsTime().Equal(plan.CreatedAt.AsTime()) {
		t.Fatalf("after restart the retired plan is %s, created %v (was %v)", again.Status, again.CreatedAt.AsTime(), plan.CreatedAt.AsTime())
	}
}

// TestUnseededStartAnalysesTheCatalogue: production does not seed, and its
// catalogue needs the planner's statistics as much as a seeded one.
func TestUnseededStartAnalysesTheCatalogue(t *testing.T) {
	url := pgtest.NewDatabase(t)
	start(t, server.Config{DatabaseURL: config.NewSecretURL(url)})
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var analysed int
	err = pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_user_tables
		WHERE relname IN ('plans', 'plan_prices') AND last_analyze IS NOT NULL`).Scan(&analysed)
	if err != nil || analysed != 2 {
		t.Fatalf("%d of 2 tables analysed (%v)", analysed, err)
	}
}

func TestNewFailsOnUnreachableDatabase(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), "catalogue", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.New(context.Background(), server.Config{DatabaseURL: config.NewSecretURL("postgres://postgres@127.0.0.1:1/catalogue?sslmode=disable&connect_timeout=2")}, tel)
	if err == nil {
		t.Fatal("New succeeded without a database")
	}
}

// The body cap every service has (httpserver.DefaultMaxBodyBytes) must hold
// the largest call the catalogue takes: a full upsert batch of its widest
// plan, with names at their longest, sent as JSON, the larger encoding.
func TestTheLargestUpsertFitsTheBodyCap(t *testing.T) {
	ctx := context.Background()
	hs := start(t, server.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true})
	client := cataloguev1.NewCatalogueJSONClient(hs.URL, internalauthtest.As(hs.Client(), internalauth.Operator))
	var widest catalogue.Plan
	for _, p := range catalogue.SeedPlans() {
		if len(p.Countries) > len(widest.Countries) {
			widest = p
		}
	}
	wide, err := client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: widest.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	batch := &cataloguev1.UpsertPlansRequest{}
	for i := range catalogue.MaxUpsertBatch {
		p := proto.CloneOf(wide)
		p.Id = catalogue.SeedPlanID(fmt.Sprintf("cap-test-%d", i)).String()
		p.Name = strings.Repeat("n", catalogue.MaxNameLength)
		p.CreatedAt, p.UpdatedAt = nil, nil
		batch.Plans = append(batch.Plans, p)
	}
	body, err := protojson.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > httpserver.DefaultMaxBodyBytes/2 {
		t.Errorf("the largest upsert is %d bytes, over half the cap of %d", len(body), httpserver.DefaultMaxBodyBytes)
	}
	res, err := client.UpsertPlans(ctx, batch)
	if err != nil || int(res.GetUpserted()) != catalogue.MaxUpsertBatch {
		t.Fatalf("upsert of %d bytes: %v, %d upserted", len(body), err, res.GetUpserted())
	}

	// Past the cap the call is refused as malformed, not read whole.
	huge := proto.CloneOf(batch.Plans[0])
	huge.Region = strings.Repeat("r", httpserver.DefaultMaxBodyBytes)
	_, err = client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{huge}})
	if twerr, ok := err.(twirp.Error); !ok || twerr.Code() != twirp.Malformed {
		t.Fatalf("a body past the cap: %v, want a malformed error", err)
	}
}

// TestInternalCallsNeedACredential: only callers with a valid token are
// served, each only what Policy lets it do, and a refused call changes
// nothing.
func TestInternalCallsNeedACredential(t *testing.T) {
	ctx := context.Background()
	hs := start(t, server.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true})
	client := func(hc *http.Client) cataloguev1.Catalogue { return cataloguev1.NewCatalogueProtobufClient(hs.URL, hc) }
	operator := client(internalauthtest.As(hs.Client(), internalauth.Operator))
	plans, err := operator.ListPlans(ctx, &cataloguev1.ListPlansRequest{Limit: 1})
	if err != nil || len(plans.GetPlans()) != 1 {
		t.Fatalf("ListPlans as operator: %v", err)
	}
	id := plans.GetPlans()[0].GetId()
	for name, tc := range map[string]struct {
		hc   *http.Client
		code twirp.ErrorCode
	}{
		"no credential":         {hs.Client(), twirp.Unauthenticated},
		"a wrong token":         {internalauth.Client(hs.Client(), internalauth.NewToken()), twirp.Unauthenticated},
		"the gateway, retiring": {internalauthtest.As(hs.Client(), internalauth.Gateway), twirp.PermissionDenied},
		"ordering, retiring":    {internalauthtest.As(hs.Client(), internalauth.Ordering), twirp.PermissionDenied},
	} {
		_, err := client(tc.hc).RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id})
		if twerr, ok := err.(twirp.Error); !ok || twerr.Code() != tc.code {
			t.Errorf("%s: RetirePlan = %v, want %s", name, err, tc.code)
		}
	}
	for _, reader := range []internalauth.Caller{internalauth.Gateway, internalauth.Ordering} {
		plan, err := client(internalauthtest.As(hs.Client(), reader)).GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
		if err != nil || plan.GetStatus() != cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE {
			t.Errorf("GetPlan as %s after refused retirements = %v, %v; want the plan, still active", reader, plan.GetStatus(), err)
		}
	}
}
