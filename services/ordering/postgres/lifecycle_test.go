package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/jobs"
	"github.com/esimplatform/esim/services/ordering/postgres"
)

// clock is a Service's clock that the test moves.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// liveEsim is a completed live order of one Japan 5 GB eSIM, and a
// Service over the store on c's time.
func liveEsim(t *testing.T, c *clock) (*ordering.Service, *postgres.Store, *pgxpool.Pool, ordering.Esim) {
	t.Helper()
	s, pool := newStore(t)
	o := newOrder(ordering.Scope{AccountID: acme.AccountID, Environment: ordering.Live}, "k", at(0))
	o.Quantity, o.TotalMinor = 1, o.UnitMinor
	o = complete(t, s, insert(t, s, o))
	svc := ordering.NewService(ordering.Deps{Store: s, Now: c.Now})
	e, err := s.Esim(context.Background(), nil, o.Esims[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return svc, s, pool, e
}

// published lists the types (and thresholds) of the eSIM events written
// for the order, oldest first.
func published(t *testing.T, pool *pgxpool.Pool, orderID uuid.UUID) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT args->>'type' || coalesce(' ' || (args->>'threshold_percent'), '')
		FROM river_job WHERE kind = $1 AND args->>'order_id' = $2 AND args->>'type' LIKE 'esim.%' ORDER BY id`,
		jobs.KindPublishEvent, orderID.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A live eSIM moves as its SM-DP+ and network report, and as its clock
// runs: installed by the notice (a replay changes nothing), active from
// the first attach the network read, told each usage threshold once,
// told a day ahead that it expires, and expired at its expiry.
func TestLiveEsimFollowsReportsAndTheClock(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: at(time.Hour)}
	svc, s, pool, e := liveEsim(t, c)

	if err := svc.HandleDownloadProgress(ctx, ordering.DownloadProgress{ICCID: e.ICCID, At: at(time.Hour)}); err != nil {
		t.Errorf("a download report (not an installation) = %v", err)
	}
	if err := svc.HandleDownloadProgress(ctx, ordering.DownloadProgress{ICCID: e.ICCID, Installed: true, At: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.HandleDownloadProgress(ctx, ordering.DownloadProgress{ICCID: e.ICCID, Installed: true, At: at(2 * time.Hour)}); err != nil {
		t.Errorf("a replayed installation report = %v, want it taken without a change", err)
	}
	if err := svc.HandleDownloadProgress(ctx, ordering.DownloadProgress{ICCID: "8999000000000000005", Installed: true}); !errors.Is(err, ordering.ErrNotFound) {
		t.Errorf("an installation report of an unknown ICCID = %v, want ErrNotFound", err)
	}
	got, _ := s.Esim(ctx, nil, e.ID)
	if got.Status != ordering.EsimInstalled || !got.InstalledAt.Equal(at(time.Hour)) {
		t.Fatalf("after the installation reports: %s installed at %s", got.Status, got.InstalledAt)
	}

	attach := at(3 * time.Hour)
	c.now = at(4 * time.Hour)
	n, err := svc.ApplyUsage(ctx, ordering.Live, []ordering.UsageReading{
		{ICCID: e.ICCID, AttachedAt: attach, UsedBytes: 3 << 30, ReadAt: at(4 * time.Hour)},
		{ICCID: "8999000000000000005", UsedBytes: 1, ReadAt: at(4 * time.Hour)},
	})
	if err != nil || n != 1 {
		t.Fatalf("ApplyUsage = %d, %v; want one eSIM changed", n, err)
	}
	got, _ = s.Esim(ctx, nil, e.ID)
	expires := attach.Add(30 * 24 * time.Hour)
	if got.Status != ordering.EsimActive || !got.ActivatedAt.Equal(attach) || !got.ExpiresAt.Equal(expires) || got.Data.UsedBytes != 3<<30 {
		t.Fatalf("after the first reading: %+v", got)
	}
	// An older reading, and the same one again, change nothing.
	if n, err := svc.ApplyUsage(ctx, ordering.Live, []ordering.UsageReading{
		{ICCID: e.ICCID, AttachedAt: attach, UsedBytes: 1 << 30, ReadAt: at(3 * time.Hour)},
		{ICCID: e.ICCID, AttachedAt: attach, UsedBytes: 3 << 30, ReadAt: at(4 * time.Hour)},
	}); err != nil || n != 0 {
		t.Errorf("stale readings = %d, %v; want nothing changed", n, err)
	}

	c.now = expires.Add(-25 * time.Hour)
	if n, err := svc.ExpireDue(ctx); err != nil || n != 0 {
		t.Errorf("expiry pass 25 h before = %d, %v; want nothing due", n, err)
	}
	c.now = expires.Add(-23 * time.Hour)
	for pass, want := range []int{1, 0} {
		if n, err := svc.ExpireDue(ctx); err != nil || n != want {
			t.Errorf("expiry pass %d, 23 h before = %d, %v; want %d", pass, n, err, want)
		}
	}
	c.now = expires
	if n, err := svc.ExpireDue(ctx); err != nil || n != 1 {
		t.Errorf("expiry pass at the expiry = %d, %v; want one expired", n, err)
	}
	got, _ = s.Esim(ctx, nil, e.ID)
	if got.Status != ordering.EsimExpired {
		t.Errorf("at its expiry the eSIM is %s", got.Status)
	}
	if n, err := svc.ApplyUsage(ctx, ordering.Live, []ordering.UsageReading{{ICCID: e.ICCID, UsedBytes: 5 << 30, ReadAt: expires.Add(time.Minute)}}); err != nil || n != 0 {
		t.Errorf("a reading after expiry = %d, %v; want nothing changed", n, err)
	}
	want := []string{"esim.installed", "esim.activated", "esim.usage 50", "esim.expiring", "esim.expired"}
	if got := published(t, pool, e.OrderID); !equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// A top-up's longer validity is read by the expiry pass as it is then:
// the eSIM topped up after being told it expires is told again a day
// before its new expiry, and expires then, not before.
func TestTopUpMovesTheExpiry(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: at(time.Hour)}
	svc, s, pool, e := liveEsim(t, c)
	if _, err := svc.ApplyUsage(ctx, ordering.Live, []ordering.UsageReading{{ICCID: e.ICCID, AttachedAt: at(time.Hour), UsedBytes: 1, ReadAt: at(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	expires := at(time.Hour).Add(30 * 24 * time.Hour)
	c.now = expires.Add(-time.Hour)
	if n, err := svc.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("expiry pass an hour before = %d, %v", n, err)
	}
	// The top-up as the domain applies it, under a lock of its own.
	topUp := newOrder(ordering.Scope{AccountID: acme.AccountID, Environment: ordering.Live}, "top-up", at(0))
	topUp.Kind, topUp.EsimID, topUp.Quantity, topUp.TotalMinor, topUp.ValidityDays, topUp.TotalBytes = ordering.KindTopUp, e.ID, 1, topUp.UnitMinor, 7, 1<<30
	insert(t, s, topUp)
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		return l.CompleteTopUp(ctx, topUp.ID, e.ID, func(e *ordering.Esim) error {
			return e.ApplyTopUp(topUp.TotalBytes, topUp.ValidityDays, c.now)
		}, event(ordering.EventTopUpCompleted, topUp.ID))
	})
	got, _ := s.Esim(ctx, nil, e.ID)
	// The order's read asks for top-ups only of eSIMs that have some.
	if o, err := s.Order(ctx, nil, e.OrderID); err != nil || len(o.Esims) != 1 || len(o.Esims[0].TopUps) != 1 || o.Esims[0].TopUps[0].ID != topUp.ID {
		t.Fatalf("the order after the top-up: %+v, %v", o, err)
	}
	newExpiry := expires.Add(7 * 24 * time.Hour)
	if !got.ExpiresAt.Equal(newExpiry) || got.Data.TotalBytes != 6<<30 || got.ValidityDays != 37 || len(got.TopUps) != 1 || got.TopUps[0].Status != ordering.StatusCompleted {
		t.Fatalf("after the top-up: %+v", got)
	}
	c.now = expires.Add(time.Hour)
	if n, err := svc.ExpireDue(ctx); err != nil || n != 0 {
		t.Errorf("expiry pass past the old expiry = %d, %v; want nothing due", n, err)
	}
	c.now = newExpiry.Add(-time.Hour)
	if n, err := svc.ExpireDue(ctx); err != nil || n != 1 {
		t.Errorf("expiry pass an hour before the new expiry = %d, %v; want the notice", n, err)
	}
	c.now = newExpiry
	if n, err := svc.ExpireDue(ctx); err != nil || n != 1 {
		t.Errorf("expiry pass at the new expiry = %d, %v", n, err)
	}
	// The attach of an eSIM whose install notice never came installs it too.
	want := []string{"esim.installed", "esim.activated", "esim.expiring", "esim.expiring", "esim.expired"}
	if got := published(t, pool, e.OrderID); !equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// The schema refuses what the domain never does: a status moving back,
// an expired eSIM moving at all, use above the total, an active eSIM
// without its expiry, and a top-up of another account's eSIM.
func TestLifecycleSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: at(time.Hour)}
	svc, _, pool, e := liveEsim(t, c)
	if _, err := svc.ApplyUsage(ctx, ordering.Live, []ordering.UsageReading{{ICCID: e.ICCID, AttachedAt: at(time.Hour), UsedBytes: 1, ReadAt: at(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	for name, stmt := range map[string]string{
		"back to ALLOCATED":     `UPDATE esims SET status = 'ALLOCATED' WHERE id = $1`,
		"back to INSTALLED":     `UPDATE esims SET status = 'INSTALLED' WHERE id = $1`,
		"use above the total":   `UPDATE esims SET used_bytes = total_bytes + 1 WHERE id = $1`,
		"use going down":        `UPDATE esims SET used_bytes = 0 WHERE id = $1`,
		"activation rewritten":  `UPDATE esims SET activated_at = activated_at + interval '1 s' WHERE id = $1`,
		"active without expiry": `UPDATE esims SET expires_at = NULL WHERE id = $1`,
		"depleted with data":    `UPDATE esims SET status = 'DEPLETED' WHERE id = $1`,
		"an unknown status":     `UPDATE esims SET status = 'LOST' WHERE id = $1`,
		"total shrinking":       `UPDATE esims SET total_bytes = total_bytes - 1 WHERE id = $1`,
		"plan rewritten":        `UPDATE esims SET plan_id = gen_random_uuid() WHERE id = $1`,
		"a top-up of another account's eSIM": `INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited,
			total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at, kind, esim_id)
			SELECT gen_random_uuid(), gen_random_uuid(), 'live', sha256('x'), gen_random_uuid(), 'p', false, false,
			1, 7, 1, 0, 'USD', 100, 100, 'pending', now(), 'topup', $1`,
	} {
		if _, err := pool.Exec(ctx, stmt, e.ID); err == nil {
			t.Errorf("%s: accepted", name)
		} else if _, ok := errors.AsType[*pgconn.PgError](err); !ok {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE esims SET status = 'EXPIRED' WHERE id = $1`, e.ID); err != nil {
		t.Fatalf("ACTIVE to EXPIRED: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE esims SET status = 'ACTIVE' WHERE id = $1`, e.ID); err == nil {
		t.Error("EXPIRED to ACTIVE: accepted")
	}
}
