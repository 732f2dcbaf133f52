package postgres

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the ordering schema as goose SQL files at the root of the
// file system, which is how libs/postgres and pgtest expect them.
var Migrations fs.FS = libpostgres.MigrationsIn(migrationFiles, "migrations")

// Open connects to the ordering database and brings its schema up to
// date: River's tables first (libpostgres.MigrateRiver), then ordering's migrations,
// the first of which to need them (00006) moves the events an older
// version left in its outbox into River's jobs.
func Open(ctx context.Context, databaseURL string, opts ...libpostgres.Option) (*pgxpool.Pool, error) {
	return libpostgres.OpenWithRiver(ctx, databaseURL, Migrations, opts...)
}
