package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverMigrationLock is the advisory lock key that serialises River's
// migrations across replicas starting at once ("river" in ASCII).
const riverMigrationLock = 0x7269766572

// MigrateRiver brings River's tables (river_job and the rest) up to the
// version of the River this binary is built with, one replica at a time.
// River's versions cannot run in one transaction (one adds an enum value
// a later one uses) and rivermigrate takes no lock of its own, so a
// session lock on a connection of its own holds a second replica back
// until the first is done; it then finds nothing left to do.
func MigrateRiver(ctx context.Context, pool *pgxpool.Pool) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	acquired, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("lock river migrations: %w", err)
	}
	// Ending the session releases the lock whatever happened.
	conn := acquired.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(riverMigrationLock)); err != nil {
		return fmt.Errorf("lock river migrations: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// OpenWithRiver is Open for a service whose jobs are River's: River's
// tables are brought up to date first, so the service's own migrations
// may move older work into them.
func OpenWithRiver(ctx context.Context, databaseURL string, migrations fs.FS, opts ...Option) (*pgxpool.Pool, error) {
	return open(ctx, databaseURL, migrations, true, opts)
}
