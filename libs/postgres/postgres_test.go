package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

var migrations = fstest.MapFS{
	"00001_widgets.sql": {Data: []byte("-- +goose Up\nCREATE TABLE widgets (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE widgets;\n")},
}

func TestEnsureDatabaseThenOpenMigratesAndIsRepeatable(t *testing.T) {
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test_created_" + hex.EncodeToString(b[:])
	u, _ := url.Parse(pgtest.AdminURL())
	u.Path = "/" + name
	t.Cleanup(func() {
		admin, err := postgres.Connect(ctx, pgtest.AdminURL())
		if err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			admin.Close()
		}
	})
	for i := range 2 {
		if err := postgres.EnsureDatabase(ctx, u.String()); err != nil {
			t.Fatalf("ensure database #%d: %v", i+1, err)
		}
		pool, err := postgres.Open(ctx, u.String(), migrations)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO widgets VALUES (1) ON CONFLICT DO NOTHING"); err != nil {
			t.Fatal(err)
		}
		pool.Close()
	}
}

// Replicas starting together each make sure of their database. Postgres
// refuses all but one CREATE DATABASE, with 42P04 or, when they race on its
// catalog, 23505: neither is an error for the others.
// Open refreshes the planner's statistics, which a server with autovacuum
// off would never do: a table filled before a restart is known by its size.
func TestOpenAnalyzes(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := postgres.Open(ctx, url, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO widgets SELECT generate_series(1, 500)"); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	pool, err = postgres.Open(ctx, url, migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var rows float64
	if err := pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE relname = 'widgets'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 500 {
		t.Fatalf("the planner knows widgets as %v rows, want 500", rows)
	}
}

func TestEnsureDatabaseConcurrently(t *testing.T) {
	ctx := context.Background()
	admin, err := postgres.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const rounds, replicas = 5, 8
	for round := range rounds {
		var b [6]byte
		_, _ = rand.Read(b[:])
		name := "test_race_" + hex.EncodeToString(b[:])
		t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
		u, _ := url.Parse(pgtest.AdminURL())
		u.Path = "/" + name
		start := make(chan struct{})
		errs := make(chan error, replicas)
		for range replicas {
			go func() {
				<-start
				errs <- postgres.EnsureDatabase(ctx, u.String())
			}()
		}
		close(start)
		for range replicas {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round+1, err)
			}
		}
	}
}

// Statements in one InSnapshot see the data as of its first: a row
// committed between them is not seen by the second.
func TestInSnapshotSeesOneMomentAcrossStatements(t *testing.T) {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, pgtest.NewDatabase(t), migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var first, second int
	err = postgres.InSnapshot(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM widgets").Scan(&first); err != nil {
			return err
		}
		// Committed by another connection while the snapshot is open.
		if _, err := pool.Exec(ctx, "INSERT INTO widgets VALUES (1)"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM widgets").Scan(&second)
	})
	if err != nil {
		t.Fatal(err)
	}
	if first != 0 || second != 0 {
		t.Fatalf("counts %d then %d inside one snapshot, want 0 and 0", first, second)
	}
}

func TestConnectPricesRandomReadsForSSDsUnlessTheURLSaysOtherwise(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ query, want string }{
		{"", "1.1"},
		{"random_page_cost=4", "4"},
	} {
		u, _ := url.Parse(pgtest.AdminURL())
		q := u.Query()
		if tc.query != "" {
			name, value, _ := strings.Cut(tc.query, "=")
			q.Set(name, value)
		}
		u.RawQuery = q.Encode()
		pool, err := postgres.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx, "SHOW random_page_cost").Scan(&got)
		pool.Close()
		if err != nil || got != tc.want {
			t.Errorf("URL %q: random_page_cost %q (%v), want %q", u.Redacted(), got, err, tc.want)
		}
	}
}

// A server that accepts and never answers cannot hang a service's start:
// every connection has a timeout unless the URL sets its own.
func TestConnectBoundsEachConnectionUnlessTheURLSaysOtherwise(t *testing.T) {
	ctx := context.Background()
	for query, want := range map[string]time.Duration{"": postgres.DefaultConnectTimeout, "connect_timeout=2": 2 * time.Second} {
		u, _ := url.Parse(pgtest.AdminURL())
		q := u.Query()
		q.Del("connect_timeout")
		if name, value, ok := strings.Cut(query, "="); ok {
			q.Set(name, value)
		}
		u.RawQuery = q.Encode()
		pool, err := postgres.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Config().ConnConfig.ConnectTimeout; got != want {
			t.Errorf("URL %q: connect timeout %s, want %s", u.Redacted(), got, want)
		}
		pool.Close()
	}
}

func TestConnectNamesTheServerWithoutPassword(t *testing.T) {
	_, err := postgres.Connect(context.Background(), "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1")
	if err == nil {
		t.Fatal("want an error")
	}
	if got := err.Error(); !strings.Contains(got, "127.0.0.1:1") || strings.Contains(got, "secret") {
		t.Fatalf("error %q should name the server and hide the password", got)
	}

	// A password's unencoded @ would put the rest of it where pgx reads
	// the host, and pgx names the host in its own errors: refused before
	// pgx sees it.
	const leaky = "postgres://u:sec@ret@127.0.0.1:1/db?connect_timeout=1"
	if _, err := postgres.Connect(context.Background(), leaky); err == nil || strings.Contains(err.Error(), "ret@") || !strings.Contains(err.Error(), "%40") {
		t.Errorf("Connect: %v, want a refusal that shows no part of the password", err)
	}
	if err := postgres.EnsureDatabase(context.Background(), leaky); err == nil || strings.Contains(err.Error(), "ret@") {
		t.Errorf("EnsureDatabase: %v, want a refusal that shows no part of the password", err)
	}
}

func TestRedactKeepsNoPasswordInAnyForm(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cr3t@db:5433/x":                     "postgres://u@db:5433/x",
		"postgres://u@db/x?password=s3cr3t&sslmode=disable": "postgres://u@db:5432/x",
		"host=db user=u password=s3cr3t dbname=x":           "postgres://u@db:5432/x",
		// Every host, once each: pgx repeats a host per TLS mode it tries.
		"postgres://u:s3cr3t@h1:1,h2:2/x?sslmode=prefer":           "postgres://u@h1:1,h2:2/x",
		"postgres://u:s3cr3t@[::1]:5433,db/x":                      "postgres://u@[::1]:5433,db:5432/x",
		"host=h1,h2,h1 port=1,2,1 user=u password=s3cr3t dbname=x": "postgres://u@h1:1,h2:2/x",
		// A socket's port names its file (.s.PGSQL.<port>), so it stays.
		"host=/var/run/postgresql user=u password=s3cr3t dbname=x":    "postgres://u@/x?host=%2Fvar%2Frun%2Fpostgresql&port=5432",
		"host=/tmp port=5433 user=u password=s3cr3t dbname=x":         "postgres://u@/x?host=%2Ftmp&port=5433",
		"host=/tmp,db port=5433,5434 user=u password=s3cr3t dbname=x": "postgres://u@/x?host=%2Ftmp,db&port=5433,5434",
		"postgres://u:s3%cr3t@db/x":                                   "(unparsable database URL)",
		"password=s3cr3t host=db port=notaport":                       "(unparsable database URL)",
		// pgx reads the password up to the first @, the rest as the host.
		"postgres://u:s3c@s3cr3t@db/x":    "(database URL with more than one @ before its host, not shown: a password's @ must be written %40)",
		"postgres://u:s3c@s3cr3t@db?db=x": "(database URL with more than one @ before its host, not shown: a password's @ must be written %40)",
		"postgres://u:s3c%40r3t@db/x":     "postgres://u@db:5432/x",
		// pgx ends a password at its first @ whatever comes before it.
		"postgres://u:s3c?r3t@s3c@db/x":                 "(database URL with more than one @ before its host, not shown: a password's @ must be written %40)",
		"postgresql://u:s3c#r@s3c@db/x":                 "(database URL with more than one @ before its host, not shown: a password's @ must be written %40)",
		"postgres://u:s3cr3t@db/x?application_name=a@b": "postgres://u@db:5432/x",
		// Key=value strings are pgx's to read: an @ there is a character.
		"application_name=x://y password=s3@c@r3t host=db user=u dbname=x": "postgres://u@db:5432/x",
	} {
		got := postgres.Redact(in)
		if got != want || strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		// What Redact gives names the same servers when read back.
		if again := postgres.Redact(got); !strings.HasPrefix(got, "(") && again != got {
			t.Errorf("Redact(%q) = %q, but Redact(%q) = %q", in, got, got, again)
		}
	}
}

// ValidateURL refuses what Open would refuse for its form, naming what it
// wants and never showing a password, in any of the forms one can take.
func TestValidateURLRefusesWhatOpenWouldWithoutThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"x":                                               "failed to parse as keyword/value",
		"postgres://u:s3%cr3t@db/x":                       "invalid percent-encoded token in password",
		"postgres://u:s3cr3t@db:port/x":                   "invalid port",
		"password=s3cr3t host=db port=bad":                "invalid port",
		"host=db password='s3 cr3t' port=x":               "invalid port",
		"postgres://u@db/x?password=s3cr3t&sslmode=bogus": "sslmode is invalid",
		"postgres://u:s3c@s3cr3t@db/x":                    "more than one @ before its host",
	} {
		err := postgres.ValidateURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v, want an error saying %q", in, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3") {
			t.Errorf("ValidateURL(%q) = %q shows the password", in, err)
		}
	}
	for _, ok := range []string{"postgres://u:s3cr3t@db:5432/x", "postgresql://u@h1:1,h2:2/x?sslmode=prefer", "host=/tmp user=u dbname=x", "postgres://u:s3c%40r3t@db/x"} {
		if err := postgres.ValidateURL(ok); err != nil {
			t.Errorf("ValidateURL(%q) = %v", ok, err)
		}
	}
}

// Queries are traced only when a tracer provider is given; google/uuid
// values go in and come out as uuids.
func TestTracingIsOptionalAndUUIDsRoundTrip(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)

	for _, tc := range []struct {
		name      string
		provider  trace.TracerProvider
		wantSpans bool
	}{{"off", nil, false}, {"on", tp, true}} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := postgres.Connect(ctx, pgtest.AdminURL(), postgres.WithTracerProvider(tc.provider))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			// Queries are traced as children of the caller's span.
			ctx, parent := tp.Tracer("test").Start(ctx, "caller")
			defer parent.End()
			spans.Reset()
			id := uuid.New()
			var back uuid.UUID
			if err := pool.QueryRow(ctx, "SELECT $1::uuid", id).Scan(&back); err != nil || back != id {
				t.Fatalf("uuid %s came back as %s (%v)", id, back, err)
			}
			if got := len(spans.GetSpans()) > 0; got != tc.wantSpans {
				t.Fatalf("spans recorded: %v, want %v", got, tc.wantSpans)
			}
		})
	}
}

// Replicas starting at once migrate once: goose's session locker holds a
// Postgres advisory lock around the whole run, so the second replica finds
// the migrations applied instead of applying them again (here, a second
// CREATE TABLE would fail and a second INSERT would duplicate the row).
// The migration outlasts goose's one-second retry of creating its version
// table, which alone would otherwise let the second replica in too late to
// collide.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	once := fstest.MapFS{
		"00001_once.sql": {Data: []byte("-- +goose Up\nCREATE TABLE once (n int);\nINSERT INTO once VALUES (1);\nSELECT pg_sleep(1.5);\n-- +goose Down\nDROP TABLE once;\n")},
	}
	const replicas = 2
	errs := make(chan error, replicas)
	start := make(chan struct{})
	for range replicas {
		go func() {
			<-start
			pool, err := postgres.Open(ctx, url, once)
			if err == nil {
				pool.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatalf("replica: %v", err)
		}
	}
	pool, err := postgres.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var rows, versions int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM once), (SELECT count(*) FROM goose_db_version WHERE version_id = 1)").Scan(&rows, &versions); err != nil || rows != 1 || versions != 1 {
		t.Fatalf("%d rows, version 1 recorded %d times (%v); want each once", rows, versions, err)
	}
}

// A migration that fails part way leaves nothing of itself behind: each
// runs in its own transaction with its version row, so the next start
// retries it whole instead of tripping over half of it.
func TestFailedMigrationLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	fails := fstest.MapFS{
		"00001_widgets.sql": migrations["00001_widgets.sql"],
		"00002_half.sql":    {Data: []byte("-- +goose Up\nCREATE TABLE gadgets (id int PRIMARY KEY);\nINSERT INTO widgets VALUES (1), (1);\n-- +goose Down\nDROP TABLE gadgets;\n")},
	}
	if _, err := postgres.Open(ctx, url, fails); err == nil {
		t.Fatal("a failing migration was reported applied")
	}
	pool, err := postgres.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var gadgets, widgets bool
	var version int64
	err = pool.QueryRow(ctx, `SELECT to_regclass('gadgets') IS NOT NULL, to_regclass('widgets') IS NOT NULL,
		(SELECT max(version_id) FROM goose_db_version)`).Scan(&gadgets, &widgets, &version)
	if err != nil || gadgets || !widgets || version != 1 {
		t.Fatalf("after the failure: gadgets %v, widgets %v, version %d (%v); want only the first migration", gadgets, widgets, version, err)
	}
}

// A pool whose connection is never given back, as when the database hung
// under a request, does not hold up the service's exit.
func TestCloseGivesUpOnAConnectionStillInUse(t *testing.T) {
	pool := pgtest.New(t, migrations)
	if err := postgres.Close(pgtest.New(t, migrations)); err != nil {
		t.Fatalf("closing an idle pool: %v", err)
	}
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.Close(pool)
	conn.Release()
	if err == nil || !strings.Contains(err.Error(), "still closing") {
		t.Fatalf("Close with a connection in use = %v, want it to give up", err)
	}
}
