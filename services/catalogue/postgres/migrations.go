package postgres

import (
	"embed"
	"io/fs"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations holds the catalogue's goose migrations at its root, as
// libs/postgres.Open and pgtest.New expect them.
var Migrations fs.FS = libpostgres.MigrationsIn(migrationFiles, "migrations")
