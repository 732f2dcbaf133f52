package postgres

import (
	"embed"
	"io/fs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the wallet schema as goose SQL files at the root of the
// file system, which is how libs/postgres and pgtest expect them.
var Migrations fs.FS = mustSub(migrationFiles, "migrations")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		// Only reachable if the embed pattern above is broken: a build bug.
		panic(err)
	}
	return sub
}
