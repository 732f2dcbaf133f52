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
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
		t.Fatalf("connect to test postgres %s: %v (start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start)", postgres.Redact(u.String()), err)
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
	pool, err := postgres.Open(context.Background(), dbURL, false, migrations)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
