package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/devcerts"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/network"
	orderingpg "github.com/esimplatform/esim/services/ordering/postgres"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	smdpserver "github.com/esimplatform/esim/services/smdp-sim/server"
)

// The usage rows: ordering applying a network's readings, against
// Postgres doing the bare writes of the same rows.
const (
	usageTarget        = "ordering: readings read through its network client and applied (ApplyUsage)"
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

// usageProfileType is the smdp-sim pool the eSIMs' profiles come from.
const usageProfileType = "bench-usage"

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

// usageScratch is the scratch database, with ordering's store and
// Service over it, the network its eSIMs' profiles are on, and their
// ICCIDs in batches.
type usageScratch struct {
	url     string
	pool    *pgxpool.Pool
	svc     *ordering.Service
	net     *usageNetwork
	batches [][]string
}

func (s *usageScratch) close() {
	_ = libpostgres.Close(s.pool)
	s.net.close()
}

// usageNetwork is smdp-sim playing the network: its Sim, on which the
// bench plays the devices, and its network API served over mutual TLS on
// a loopback port, which ordering's network client reads.
type usageNetwork struct {
	srv    *smdpserver.Server
	hs     *http.Server
	client *network.Client
}

func (n *usageNetwork) close() {
	n.client.Close()
	_ = n.hs.Close()
	n.srv.Close()
}

// startNetwork starts smdp-sim with count profiles, certificates of its
// own in dir, and ordering's client of its network API.
func startNetwork(ctx context.Context, dir string, count int) (*usageNetwork, error) {
	certs, err := devcerts.Generate(dir, "127.0.0.1", "localhost")
	if err != nil {
		return nil, fmt.Errorf("the network's certificates: %w", err)
	}
	srv, err := smdpserver.New(ctx, smdpserver.Config{
		TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, ClientCAFile: certs.CACert,
		SMDPAddress: "smdp-sim.esim.invalid", ProfileTypes: fmt.Sprintf("%s:%d", usageProfileType, count),
	}, &telemetry.Telemetry{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("smdp-sim: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("smdp-sim's network API: %w", err)
	}
	hs := &http.Server{Handler: srv.ES2PlusHandler(), TLSConfig: srv.TLSConfig(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.ServeTLS(ln, "", "") }() // ends with close
	client, err := network.New(network.Config{URL: "https://" + ln.Addr().String(), CertFile: certs.ClientCert, KeyFile: certs.ClientKey, CAFile: certs.CACert})
	if err != nil {
		_ = hs.Close()
		srv.Close()
		return nil, fmt.Errorf("ordering's network client: %w", err)
	}
	return &usageNetwork{srv: srv, hs: hs, client: client}, nil
}

// issue has the SM-DP+ release n profiles (ES2+ downloadOrder and
// confirmOrder, called in process) and their devices install them and
// attach, and returns their ICCIDs.
func (n *usageNetwork) issue(ctx context.Context, count int) ([]string, error) {
	sim := n.srv.Sim()
	release := true
	iccids := make([]string, 0, count)
	for range count {
		d, err := sim.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: usageProfileType})
		if err == nil {
			_, err = sim.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: d.ICCID, ReleaseFlag: &release})
		}
		if err == nil {
			_, err = sim.Install(ctx, d.ICCID, "")
		}
		if err == nil {
			_, err = sim.Attach(d.ICCID)
		}
		if err != nil {
			return nil, fmt.Errorf("smdp-sim: issue a profile and attach its device: %w", err)
		}
		iccids = append(iccids, d.ICCID)
	}
	return iccids, nil
}

// use has the devices of iccids use bytes each.
func (n *usageNetwork) use(iccids []string, bytes int64) error {
	for _, iccid := range iccids {
		if _, err := n.srv.Sim().Use(iccid, bytes); err != nil {
			return fmt.Errorf("smdp-sim: use data on %s: %w", iccid, err)
		}
	}
	return nil
}

// readAndApply is one batch of ordering's usage pass: the network's
// readings of the batch, through ordering's client, applied. It returns
// how many readings changed an eSIM.
func (s *usageScratch) readAndApply(ctx context.Context, batch []string) (read, changed int, err error) {
	readings, err := s.net.client.Usage(ctx, batch)
	if err != nil {
		return 0, 0, err
	}
	changed, err = s.svc.ApplyUsage(ctx, ordering.Live, readings)
	return len(readings), changed, err
}

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

// usagePhase measures the usage rows: ordering reading a batch through
// its network client and applying it over the real store, one batch
// after another as its usage pass does, then pgbench updating the same
// rows' columns a batch at a time, both one batch at a time for
// cfg.duration after cfg.warmup. Before each batch its devices use more
// data, which is not timed.
func usagePhase(ctx context.Context, cfg config, runDir string, say func(string, ...any)) (res usageResults, err error) {
	res.esims, res.batch = cfg.usageEsims, ordering.UsageBatch
	pgbenchPath, err := findPgbench()
	if err != nil {
		return res, err
	}
	say("usage: a scratch database %s of ordering's schema with %d ACTIVE live eSIMs", cfg.usageDatabase, cfg.usageEsims)
	s, err := prepareUsage(ctx, cfg.pgURL, cfg.usageDatabase, cfg.usageEsims, filepath.Join(runDir, "usage-network"))
	if err != nil {
		return res, err
	}
	defer s.close()

	// apply runs batches for d of their own time: the devices' use
	// before each is the network's doing, and not counted.
	apply := func(d time.Duration) (result, error) {
		rec := &recorder{}
		var timed time.Duration
		for i := 0; timed < d && ctx.Err() == nil; i++ {
			b := s.batches[i%len(s.batches)]
			if err := s.net.use(b, usageStep); err != nil {
				return result{}, err
			}
			t := time.Now()
			read, changed, err := s.readAndApply(ctx, b)
			took := time.Since(t)
			timed += took
			if err == nil && changed != len(b) {
				res.unchanged += len(b) - changed
				err = fmt.Errorf("%d of %d readings changed no eSIM (%d read)", len(b)-changed, len(b), read)
			}
			rec.record(took, err)
		}
		return merge([]*recorder{rec}, timed), nil
	}
	if cfg.warmup > 0 {
		say("%s: warming up for %s", usageTarget, cfg.warmup)
		if _, err := apply(cfg.warmup); err != nil {
			return res, err
		}
	}
	res.unchanged = 0
	if err := s.vacuum(ctx); err != nil {
		return res, err
	}
	say("%s: batches of %d, one at a time, %s", usageTarget, ordering.UsageBatch, cfg.duration)
	if res.ordering, err = apply(cfg.duration); err != nil {
		return res, err
	}
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
// them), and n live eSIMs of completed orders, written through the store,
// whose profiles smdp-sim issued and whose devices attached, activated by
// the network's first reading through ApplyUsage; their ICCIDs in batches
// of UsageBatch in a table of the control's. dir takes the network's
// certificates.
func prepareUsage(ctx context.Context, serverURL, name string, n int, dir string) (*usageScratch, error) {
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
	nw, err := startNetwork(ctx, dir, n)
	if err != nil {
		return nil, err
	}
	issued, err := nw.issue(ctx, n)
	if err != nil {
		nw.close()
		return nil, err
	}
	pool, err := orderingpg.Open(ctx, db, orderingpg.WithPoolDefaults())
	if err != nil {
		nw.close()
		return nil, fmt.Errorf("the usage rows' database: %w", err)
	}
	s := &usageScratch{url: db, pool: pool, net: nw}
	store := orderingpg.NewStore(pool, 0)
	s.svc = ordering.NewService(ordering.Deps{Store: store})
	scope := ordering.Scope{AccountID: uuid.New(), Environment: ordering.Live}
	var iccids []string
	for first := 0; first < n; first += usageOrderSize {
		o, esims := usageOrder(scope, first, issued[first:min(first+usageOrderSize, n)])
		err := store.WithLock(ctx, "bench/"+o.ID.String(), func(ctx context.Context, l ordering.Locked) error {
			if err := l.InsertOrder(ctx, o); err != nil {
				return err
			}
			id := uuid.Must(uuid.NewV7())
			return l.Complete(ctx, o.ID, esims, ordering.Event{ID: "evt_" + hex.EncodeToString(id[:]), Type: ordering.EventOrderCompleted, OrderID: o.ID, CreatedAt: o.CreatedAt})
		})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("the usage rows' eSIMs: order %d: %w", first/usageOrderSize, err)
		}
		for _, e := range esims {
			iccids = append(iccids, e.ICCID)
		}
	}
	s.batches = batchesOf(iccids, ordering.UsageBatch)
	for _, b := range s.batches {
		if read, k, err := s.readAndApply(ctx, b); err != nil || k != len(b) {
			s.close()
			return nil, fmt.Errorf("activate the usage rows' eSIMs: %d of %d read, %d activated: %v", read, len(b), k, err)
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

// usageOrder is a completed live order of a 5 GB plan, an eSIM of each
// of iccids; first numbers it among the run's.
func usageOrder(scope ordering.Scope, first int, iccids []string) (ordering.Order, []ordering.Esim) {
	created := time.Now().UTC().Truncate(time.Microsecond)
	count := len(iccids)
	key := "bench-usage-" + strconv.Itoa(first)
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
			ICCID: iccids[i], MatchingID: "BENCH-" + strconv.Itoa(first+i), SMDPAddress: "smdp-sim.esim.invalid",
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

// usageSection names the usage rows' section, in its heading and in the
// Goals table.
const usageSection = "Usage ingestion"

// section is the report's usage rows and their ratio.
func (u *usageResults) section(p func(string, ...any), cfg config) {
	p("## %s\n\n", usageSection)
	methodLine(p, "usage-ingestion", "Ordering's usage pass over %d ACTIVE eSIMs in the scratch database `%s`, batches of %d read from smdp-sim's network API through ordering's network client and applied by `ApplyUsage`, against pgbench updating the same rows, each for %s after %s of warm-up",
		u.esims, cfg.usageDatabase, u.batch, cfg.duration, cfg.warmup)
	p("| row | readings/s | batches | p50 a batch | p99 a batch | errors |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range []struct {
		name string
		res  result
	}{{usageTarget, u.ordering}, {usageControlTarget, u.control}} {
		p("| %s | %.0f | %d | %s | %s | %d |\n", r.name, readingsPerSecond(r.res, u.batch), r.res.Requests, ms(r.res.P50), ms(r.res.P99), r.res.Errors)
	}
	p("\nOrdering / pgbench: **%.2f** (%.0f / %.0f readings/s)\n\n", u.ratio(), readingsPerSecond(u.ordering, u.batch), readingsPerSecond(u.control, u.batch))
	if u.ordering.Errors > 0 {
		p("%d of ordering's batches failed (e.g. %s), %d readings changing no eSIM.\n\n", u.ordering.Errors, u.ordering.FirstErr, u.unchanged)
	}
}

// goals are the usage rows' goal: a failed batch misses it, whatever the
// rate.
func (u *usageResults) goals() []goal {
	ratio := u.ratio()
	return []goal{{section: usageSection, name: "usage readings applied by ordering / pgbench batch UPDATE of the same rows, per second",
		measured: fmt.Sprintf("%.2f", ratio), want: fmt.Sprintf(">= %.2f", targetUsageRatio), met: ratio >= targetUsageRatio && u.ordering.Errors == 0}}
}
