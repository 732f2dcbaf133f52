package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/ordering"
	orderingpg "github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/ordering/sandbox"
)

// The usage rows: ordering applying a network's readings, against
// Postgres doing the bare writes of the same rows.
const (
	usageTarget        = "ordering ApplyUsage, readings applied"
	usageControlTarget = "control: pgbench batch UPDATE of the same rows (used_bytes, data_updated_at)"
)

// targetUsageRatio is issue 31's goal: ordering applies usage at no less
// than a quarter of the rate at which Postgres alone writes it.
const targetUsageRatio = 0.25

// usageDatabase is the scratch database of ordering's schema the usage
// rows run on, next to the platform's esim_ databases: made anew every
// run, so no platform data is touched and every run starts alike.
const usageDatabase = "esim_bench_usage"

// usageEsims is how many ACTIVE live eSIMs the readings are about: 40
// batches, so that consecutive batches are different rows, as a pass
// over a network's eSIMs is.
const usageEsims = 40 * ordering.UsageBatch

// usageOrderSize is the eSIMs of each order the scratch database is
// filled with, the most an order takes.
const usageOrderSize = 50

// usageStep is how much more data each reading reports than the eSIM's
// last one: small against a plan's 5 GB, so that no reading of a run
// crosses a threshold. The rows measure the common reading, which
// updates a row and publishes nothing.
const usageStep = 1 << 20

// usageReadingsSource says where the readings came from, for the report.
const usageReadingsSource = "generated in the bench (ordering's network client and smdp-sim's network API are not on this branch yet), " +
	"the eSIM's last reading plus 1 MiB, read now"

// usageResults are the usage rows of a run.
type usageResults struct {
	esims, batch int
	// ordering is ApplyUsage's calls, one batch each (Requests: batches),
	// control pgbench's transactions, one batch each.
	ordering, control result
	// unchanged counts readings ApplyUsage applied to no eSIM: each is
	// new data of a known eSIM, so any is a fault, and its batch an error.
	unchanged int
}

// readingsPerSecond is r's batches per second as readings.
func readingsPerSecond(r result, batch int) float64 { return r.RPS() * float64(batch) }

// ratio is ordering's readings per second over the control's; 0 when
// the control did nothing.
func (u usageResults) ratio() float64 {
	if u.control.RPS() <= 0 {
		return 0
	}
	return u.ordering.RPS() / u.control.RPS()
}

// usageScratch is the scratch database: ordering's store and Service over
// it, and its eSIMs' ICCIDs in batches.
type usageScratch struct {
	url     string
	pool    *pgxpool.Pool
	svc     *ordering.Service
	batches [][]string
}

func (s *usageScratch) close() { _ = libpostgres.Close(s.pool) }

// vacuum clears the dead rows of earlier updates. Every update of a row
// leaves one, and an update that finds no room on its row's page writes
// every index of the table anew: each side starts as clean as the
// other, not behind the one before.
func (s *usageScratch) vacuum(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE esims"); err != nil {
		return fmt.Errorf("vacuum the usage rows' eSIMs: %w", err)
	}
	return nil
}

// usagePhase measures the usage rows: ordering's ApplyUsage over the real
// store, one batch after another as its usage pass applies them, then
// pgbench updating the same rows' columns a batch at a time, both with
// one connection at a time for cfg.duration after cfg.warmup.
func usagePhase(ctx context.Context, cfg config, runDir string, say func(string, ...any)) (res usageResults, err error) {
	res.esims, res.batch = cfg.usageEsims, ordering.UsageBatch
	pgbenchPath, err := findPgbench()
	if err != nil {
		return res, err
	}
	say("usage: a scratch database %s of ordering's schema with %d ACTIVE live eSIMs", cfg.usageDatabase, cfg.usageEsims)
	s, err := prepareUsage(ctx, cfg.pgURL, cfg.usageDatabase, cfg.usageEsims)
	if err != nil {
		return res, err
	}
	defer s.close()

	pass := 0 // how many readings each eSIM had: the next reports one step more
	apply := func(d time.Duration) result {
		rec := &recorder{}
		start := time.Now()
		for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
			b := s.batches[i%len(s.batches)]
			if i%len(s.batches) == 0 {
				pass++
			}
			readings := make([]ordering.UsageReading, len(b))
			now := time.Now()
			for j, iccid := range b {
				readings[j] = ordering.UsageReading{ICCID: iccid, UsedBytes: int64(pass) * usageStep, ReadAt: now}
			}
			t := time.Now()
			n, err := s.svc.ApplyUsage(ctx, ordering.Live, readings)
			took := time.Since(t)
			if err == nil && n != len(readings) {
				res.unchanged += len(readings) - n
				err = fmt.Errorf("%d of %d readings changed no eSIM", len(readings)-n, len(readings))
			}
			rec.record(took, err)
		}
		return merge([]*recorder{rec}, time.Since(start))
	}
	if cfg.warmup > 0 {
		say("%s: warming up for %s", usageTarget, cfg.warmup)
		apply(cfg.warmup)
	}
	res.unchanged = 0
	if err := s.vacuum(ctx); err != nil {
		return res, err
	}
	say("%s: batches of %d, one at a time, %s", usageTarget, ordering.UsageBatch, cfg.duration)
	res.ordering = apply(cfg.duration)
	say("%s: %.0f readings/s, p50 %s, p99 %s a batch, %d errors", usageTarget, readingsPerSecond(res.ordering, res.batch), ms(res.ordering.P50), ms(res.ordering.P99), res.ordering.Errors)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}

	b, err := usagePgbench(s, pgbenchPath, filepath.Join(runDir, "pgbench-usage"))
	if err != nil {
		return res, err
	}
	if cfg.warmup > 0 {
		say("%s: warming up for %s", usageControlTarget, cfg.warmup)
		if _, err := b.run(ctx, 1, cfg.warmup); err != nil {
			return res, err
		}
	}
	if err := s.vacuum(ctx); err != nil {
		return res, err
	}
	say("%s: %s, 1 client, %s", usageControlTarget, b.path, cfg.duration)
	if res.control, err = b.run(ctx, 1, cfg.duration); err != nil {
		return res, err
	}
	say("%s: %.0f readings/s, p50 %s, p99 %s a batch, %d failed", usageControlTarget, readingsPerSecond(res.control, res.batch), ms(res.control.P50), ms(res.control.P99), res.control.Errors)
	return res, nil
}

// prepareUsage makes the scratch database name anew on the server of
// serverURL: ordering's schema (its migrations, as the service runs
// them), n live eSIMs of completed orders, written through the store,
// activated by an attach reading through ApplyUsage, and their ICCIDs in
// batches of UsageBatch in a table of the control's.
func prepareUsage(ctx context.Context, serverURL, name string, n int) (*usageScratch, error) {
	db, err := databaseURL(serverURL, name)
	if err != nil {
		return nil, err
	}
	if err := dropDatabase(ctx, serverURL, name); err != nil {
		return nil, err
	}
	if err := libpostgres.EnsureDatabase(ctx, db); err != nil {
		return nil, fmt.Errorf("the usage rows' database: %w", err)
	}
	pool, err := orderingpg.Open(ctx, db, orderingpg.WithPoolDefaults())
	if err != nil {
		return nil, fmt.Errorf("the usage rows' database: %w", err)
	}
	s := &usageScratch{url: db, pool: pool}
	store := orderingpg.NewStore(pool, 0)
	s.svc = ordering.NewService(ordering.Deps{Store: store})
	scope := ordering.Scope{AccountID: uuid.New(), Environment: ordering.Live}
	var iccids []string
	for serial := 1; serial <= n; serial += usageOrderSize {
		o, esims := usageOrder(scope, int64(serial), min(usageOrderSize, n-serial+1))
		err := store.WithLock(ctx, "bench/"+o.ID.String(), func(ctx context.Context, l ordering.Locked) error {
			if err := l.InsertOrder(ctx, o); err != nil {
				return err
			}
			id := uuid.Must(uuid.NewV7())
			return l.Complete(ctx, o.ID, esims, ordering.Event{ID: "evt_" + hex.EncodeToString(id[:]), Type: ordering.EventOrderCompleted, OrderID: o.ID, CreatedAt: o.CreatedAt})
		})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("the usage rows' eSIMs: order %d: %w", serial/usageOrderSize, err)
		}
		for _, e := range esims {
			iccids = append(iccids, e.ICCID)
		}
	}
	s.batches = batchesOf(iccids, ordering.UsageBatch)
	attached := time.Now()
	for _, b := range s.batches {
		readings := make([]ordering.UsageReading, len(b))
		for i, iccid := range b {
			readings[i] = ordering.UsageReading{ICCID: iccid, AttachedAt: attached, ReadAt: attached}
		}
		if k, err := s.svc.ApplyUsage(ctx, ordering.Live, readings); err != nil || k != len(b) {
			s.close()
			return nil, fmt.Errorf("activate the usage rows' eSIMs: %d of %d activated: %v", k, len(b), err)
		}
	}
	var active int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM esims WHERE environment = 'live' AND status = 'ACTIVE'`).Scan(&active); err != nil || active != n {
		s.close()
		return nil, fmt.Errorf("the usage rows' eSIMs: %d ACTIVE, want %d (%v)", active, n, err)
	}
	// The control's batches are the same ICCIDs, kept where its script
	// reads them by number.
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_usage_batches (batch integer PRIMARY KEY, iccids text[] NOT NULL)`); err != nil {
		s.close()
		return nil, fmt.Errorf("the control's batches: %w", err)
	}
	for i, b := range s.batches {
		if _, err := pool.Exec(ctx, `INSERT INTO bench_usage_batches VALUES ($1, $2)`, i, b); err != nil {
			s.close()
			return nil, fmt.Errorf("the control's batches: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		s.close()
		return nil, fmt.Errorf("analyze the usage rows' database: %w", err)
	}
	return s, nil
}

// dropDatabase drops name on the server of serverURL, whoever is still
// connected to it (a run interrupted before closing its pool).
func dropDatabase(ctx context.Context, serverURL, name string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("postgres at %s: %w", libpostgres.Redact(serverURL), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop the scratch database %s: %w", name, err)
	}
	return nil
}

// usageOrder is a completed live order of count eSIMs of a 5 GB plan,
// their ICCIDs the sandbox's of serials first to first+count-1: valid and
// unique in the scratch database.
func usageOrder(scope ordering.Scope, first int64, count int) (ordering.Order, []ordering.Esim) {
	created := time.Now().UTC().Truncate(time.Microsecond)
	key := "bench-usage-" + strconv.FormatInt(first, 10)
	fp := sha256.Sum256([]byte(key))
	o := ordering.Order{
		ID: uuid.Must(uuid.NewV7()), Kind: ordering.KindEsims, Scope: scope, IdempotencyKey: key, Fingerprint: fp[:],
		PlanID: uuid.New(), PlanName: "Bench 5 GB, 30 days", TotalBytes: 5 << 30, ValidityDays: 30, Countries: []string{"JP"},
		Quantity: int32(count), Currency: ordering.USD, UnitMinor: 500, TotalMinor: 500 * int64(count),
		Status: ordering.StatusPending, CreatedAt: created,
	}
	esims := make([]ordering.Esim, count)
	for i := range esims {
		esims[i] = ordering.Esim{
			ID: uuid.Must(uuid.NewV7()), OrderID: o.ID, Position: int32(i), PlanName: o.PlanName,
			ICCID: sandbox.ICCID(first + int64(i)), MatchingID: "BENCH-" + strconv.FormatInt(first+int64(i), 10), SMDPAddress: sandbox.DefaultSMDPAddress,
			QRToken: qrToken(), Status: ordering.EsimAllocated,
			ValidityDays: o.ValidityDays, Data: ordering.EsimData{TotalBytes: o.TotalBytes, UpdatedAt: created},
			CreatedAt: created,
		}
	}
	return o, esims
}

func qrToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// batchesOf cuts items into consecutive batches of size, the last
// shorter.
func batchesOf[T any](items []T, size int) [][]T {
	var out [][]T
	for len(items) > 0 {
		n := min(size, len(items))
		out = append(out, items[:n:n])
		items = items[n:]
	}
	return out
}

// usageScript is the control: one batch's rows, chosen at random among
// the batches, written as ApplyUsage writes a reading (data used and when
// it was read) in one statement, found by ICCID as ApplyUsage finds them.
// The batch's ICCIDs come from bench_usage_batches by number, a read of
// one row by its key.
func usageScript(batches int) string {
	return `\set b random(0, ` + strconv.Itoa(batches-1) + `)
UPDATE esims SET used_bytes = used_bytes + ` + strconv.Itoa(usageStep) + `, data_updated_at = now()
WHERE environment = 'live' AND iccid = ANY((SELECT iccids FROM bench_usage_batches WHERE batch = :b)::text[]);
`
}

// usagePgbench is pgbench over the scratch database with usageScript.
func usagePgbench(s *usageScratch, path, dir string) (*pgbench, error) {
	env, err := pgbenchConnEnv(s.url)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "usage.sql")
	if err := os.WriteFile(script, []byte(usageScript(len(s.batches))), 0o644); err != nil {
		return nil, err
	}
	return &pgbench{path: path, env: env, dir: dir, script: script}, nil
}
