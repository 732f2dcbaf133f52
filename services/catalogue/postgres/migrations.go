package postgres

import (
	"embed"
	"io/fs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations holds the catalogue's goose migrations at its root, as
// libs/postgres.Open and pgtest.New expect them.
var Migrations = func() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // unreachable: the directory is embedded above
	}
	return sub
}()
