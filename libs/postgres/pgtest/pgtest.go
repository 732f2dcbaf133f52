// Package pgtest gives each test its own freshly migrated database on the
// real Postgres server, dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/esimplatform/esim/libs/postgres"
)

// AdminURL is the server tests create their databases on. TEST_DATABASE_URL
// overrides the default, the local server of `make test`.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates an empty database and returns its URL; it is dropped
// when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := randomName()

	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("connect to test postgres %s: %v (is it running? pg_lsclusters lists this machine's clusters, pg_ctlcluster --skip-systemctl-redirect VERSION NAME start starts one; or set TEST_DATABASE_URL)", postgres.Redact(u.String()), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	dropAtEnd(t, name)
	u.Path = "/" + name
	return u.String()
}

// DatabasePrefix returns a fresh prefix for code under test that creates
// its own databases (<prefix><name>, as `make run` does); the databases
// named by prefix+name for each of names are dropped when the test ends.
func DatabasePrefix(t testing.TB, names ...string) string {
	t.Helper()
	prefix := randomName() + "_"
	full := make([]string, len(names))
	for i, n := range names {
		full[i] = prefix + n
	}
	dropAtEnd(t, full...)
	return prefix
}

func randomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test_" + hex.EncodeToString(b[:])
}

// dropAtEnd drops the named databases when the test ends, even while
// connections to them are still open.
func dropAtEnd(t testing.TB, names ...string) {
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Errorf("drop test databases: %v", err)
			return
		}
		defer c.Close(ctx)
		for _, n := range names {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Errorf("drop test database %s: %v", n, err)
			}
		}
	})
}

// New creates a database, applies migrations and returns a pool closed when
// the test ends.
func New(t testing.TB, migrations fs.FS) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	pool, err := postgres.Open(context.Background(), dbURL, migrations)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AfterStatement returns a pool option that calls do once, as soon as the
// first statement named name (sqlc's "-- name: X" header) has finished and
// before the code that ran it goes on: a test's way to commit a concurrent
// write between two statements of the code under test, deterministically.
// do runs on the caller's goroutine and must use another pool.
func AfterStatement(name string, do func()) postgres.Option {
	return func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = &afterStatement{header: "-- name: " + name + " ", do: do}
	}
}

type afterStatement struct {
	header string
	once   sync.Once
	do     func()
}

type namedStatement struct{}

func (a *afterStatement) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, a.header) {
		return context.WithValue(ctx, namedStatement{}, true)
	}
	return ctx
}

func (a *afterStatement) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(namedStatement{}) != nil {
		a.once.Do(a.do)
	}
}

// CheckMigrationsReversible migrates a fresh database up, all the way down
// and up again: every migration's Down must undo its Up, or the next Up
// fails on what was left behind.
func CheckMigrationsReversible(t testing.TB, migrations fs.FS) {
	t.Helper()
	ctx := context.Background()
	pool := New(t, migrations)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations)
	if err != nil {
		t.Fatalf("load migrations: %v", err)
	}
	if _, err := provider.DownTo(ctx, 0); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'S') AND c.relname NOT LIKE 'goose_db_version%'
		UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'`)
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(left) > 0 {
		t.Fatalf("after migrating down: %v left behind (%v)", left, err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
}

// WithMaxConns is dbURL with a pool of at most n connections: the tests
// of several packages, each starting services, share one Postgres and its
// max_connections.
func WithMaxConns(t testing.TB, dbURL string, n int) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// CheckReplicasStartTogether opens a new database with open from replicas
// starting at once, as a rollout does, and fails the test unless every
// one comes up: migrations that take no lock of their own (River's)
// would collide on their DDL.
func CheckReplicasStartTogether(t testing.TB, replicas int, open func(ctx context.Context, databaseURL string) (*pgxpool.Pool, error)) {
	t.Helper()
	dbURL := NewDatabase(t)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			pool, err := open(context.Background(), dbURL)
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			pool.Close()
		})
	}
	wg.Wait()
}
