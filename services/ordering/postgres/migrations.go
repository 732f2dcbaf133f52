package postgres

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/ordering/jobs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the ordering schema as goose SQL files at the root of the
// file system, which is how libs/postgres and pgtest expect them.
var Migrations fs.FS = libpostgres.MigrationsIn(migrationFiles, "migrations")

// Open connects to the ordering database and brings its schema up to
// date: River's tables first (jobs.Migrate), then ordering's migrations,
// the first of which to need them (00006) moves the events an older
// version left in its outbox into River's jobs.
func Open(ctx context.Context, databaseURL string, opts ...libpostgres.Option) (*pgxpool.Pool, error) {
	pool, err := libpostgres.Connect(ctx, databaseURL, opts...)
	if err != nil {
		return nil, err
	}
	err = jobs.Migrate(ctx, pool)
	// libpostgres.Open runs goose on a pool of its own making.
	pool.Close()
	if err != nil {
		return nil, err
	}
	return libpostgres.Open(ctx, databaseURL, Migrations, opts...)
}
