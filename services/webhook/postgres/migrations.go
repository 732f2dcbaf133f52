package postgres

import (
	"embed"
	"io/fs"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the webhook schema as goose SQL files at the root of the
// file system, which is how libs/postgres and pgtest expect them.
var Migrations fs.FS = libpostgres.MigrationsIn(migrationFiles, "migrations")
