// Package postgres connects services to their own Postgres database: a
// traced pgx pool, creation of the database where the platform is allowed
// to create it, and embedded migrations run at start.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
	"go.opentelemetry.io/otel/trace"
)

// Option adjusts how Connect and Open set up the pool.
type Option func(*pgxpool.Config)

// WithTracerProvider traces every query as a child of the caller's span.
// A nil provider means tracing is off: no tracer is installed at all.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(cfg *pgxpool.Config) {
		if tp != nil {
			cfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tp))
		}
	}
}

// defaultRuntimeParams are session settings every pool starts with unless
// the database URL names them (?random_page_cost=4 restores Postgres's own).
//
// random_page_cost: Postgres's default of 4 prices a random read as a
// spinning disk's seek. Our tables are small, hot and on SSDs, and with
// that price the planner reads every row of a 500-row table rather than
// probe its primary key five times: a generic plan assumes ten ids for
// `id = ANY($1)`, and ten seeks at 4 cost more than a 12-page scan. 1.1 is
// the value Postgres's documentation suggests for solid-state storage.
var defaultRuntimeParams = map[string]string{"random_page_cost": "1.1"}

// DefaultConnectTimeout bounds each new connection where the database URL
// sets no connect_timeout, or sets libpq's 0 (wait for ever), which a
// service must not do.
const DefaultConnectTimeout = 5 * time.Second

// Connect opens a pool and checks that the server answers.
func Connect(ctx context.Context, databaseURL string, opts ...Option) (*pgxpool.Pool, error) {
	if err := CheckURL(databaseURL); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	// pgx waits for a server that accepts and never answers for as long as
	// the context lets it; at start that context has no deadline, and a
	// service would hang silently until Kubernetes' startup probe killed it.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	for name, value := range defaultRuntimeParams {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = value
		}
	}
	// google/uuid values then travel in pgx's binary uuid format; without
	// this pgx encodes each one through driver.Valuer as text, building and
	// discarding an error on every query.
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		return nil
	}
	for _, opt := range opts {
		opt(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		_ = Close(pool) // unreachable: that is the error
		return nil, fmt.Errorf("postgres at %s is unreachable: %w", Redact(databaseURL), err)
	}
	return pool, nil
}

// EnsureDatabase creates the database named in databaseURL when it does not
// exist yet, connecting to the server's "postgres" database to do so. It is
// safe to call concurrently and repeatedly.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	if err := CheckURL(databaseURL); err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("database url names no database")
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres at %s is unreachable: %w", Redact(databaseURL), err)
	}
	defer conn.Close(ctx)

	// The one SQL written in Go rather than sqlc: it runs against the
	// maintenance database, outside any service's schema, and CREATE
	// DATABASE takes no parameters.
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	// 42P04 duplicate_database, 23505 unique_violation: another process won
	// the race to create it, which is just as good.
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// migrate applies every pending migration in migrations (goose SQL files at
// its root). A Postgres advisory lock serialises replicas starting at once.
func migrate(ctx context.Context, pool *pgxpool.Pool, migrations fs.FS) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	// A replica that finds another migrating polls for the lock once a
	// second, for up to five minutes as goose's default does: goose's
	// five-second poll held back every replica but the first by five
	// seconds at start, for migrations that take milliseconds.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Open is what a service does at start: connect, migrate, and refresh the
// planner's statistics. The database must exist; creating it is the
// platform's job (EnsureDatabase), not a service's.
//
// Without statistics (a server with autovacuum off, as development and
// test machines often run, or one that has not got round to a table) the
// planner cannot tell an index that finds one row from one that finds an
// account's every row, and a lookup by key can read them all. ANALYZE
// samples, so it costs little even on large tables.
func Open(ctx context.Context, databaseURL string, migrations fs.FS, opts ...Option) (*pgxpool.Pool, error) {
	return open(ctx, databaseURL, migrations, false, opts)
}

func open(ctx context.Context, databaseURL string, migrations fs.FS, river bool, opts []Option) (*pgxpool.Pool, error) {
	pool, err := Connect(ctx, databaseURL, opts...)
	if err != nil {
		return nil, err
	}
	if river {
		if err := MigrateRiver(ctx, pool); err != nil {
			_ = Close(pool)
			return nil, err
		}
	}
	if err := migrate(ctx, pool, migrations); err != nil {
		_ = Close(pool) // the start failed: its error says why
		return nil, err
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		_ = Close(pool)
		return nil, fmt.Errorf("analyze: %w", err)
	}
	return pool, nil
}

// ValidateURL reports why Open would refuse databaseURL for its form, or
// nil, so that configuration checks report a bad DATABASE_URL with every
// other bad setting, before anything starts. pgx's errors show the URL
// with its password masked.
func ValidateURL(databaseURL string) error {
	if err := CheckURL(databaseURL); err != nil {
		return err
	}
	if _, err := pgxpool.ParseConfig(databaseURL); err != nil {
		return fmt.Errorf("want postgres://user:password@host:5432/database (%w)", err)
	}
	return nil
}

// CheckURL refuses a database URL with an unencoded "@" in its password.
// pgx, as libpq, ends the user and password at the first "@" and reads the
// rest as the host (postgres://u:p@ss@db/x: host "ss@db"), which every
// message about the host, pgx's own included, would then show. Key=value
// strings are not URLs and are left to pgx.
func CheckURL(databaseURL string) error {
	rest, ok := strings.CutPrefix(databaseURL, "postgres://")
	if !ok {
		if rest, ok = strings.CutPrefix(databaseURL, "postgresql://"); !ok {
			return nil
		}
	}
	i := strings.IndexAny(rest, "@/")
	if i < 0 || rest[i] != '@' {
		return nil
	}
	host := rest[i+1:]
	if j := strings.IndexAny(host, "/?"); j >= 0 {
		host = host[:j]
	}
	if strings.Contains(host, "@") {
		return errors.New("database URL with more than one @ before its host, not shown: a password's @ must be written %40")
	}
	return nil
}

// Redact names the servers and database of a database URL, for messages
// and logs, without its password. It rebuilds the name from the parsed
// fields rather than masking the input: a password can also sit in the
// query string (?password=) or in key=value form (password=...), and an
// input that does not parse is not echoed at all.
//
// Every host pgx would try is named once, in order, as
// postgres://u@h1:1,h2:2/x. Unix-socket directories go in ?host= the way
// libpq's URLs carry them, with ?port= always beside them: the port names
// the socket file (.s.PGSQL.<port>) as it names a TCP address, and a TCP
// host always shows its port too.
func Redact(databaseURL string) string {
	if err := CheckURL(databaseURL); err != nil {
		return "(" + err.Error() + ")"
	}
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return "(unparsable database URL)"
	}
	type hostPort struct {
		host string
		port uint16
	}
	// pgx lists a host once per TLS mode it will try (sslmode=prefer
	// gives two), so the fallbacks repeat hosts.
	hosts := []hostPort{{cfg.Host, cfg.Port}}
	socket := strings.HasPrefix(cfg.Host, "/")
	for _, fb := range cfg.Fallbacks {
		if hp := (hostPort{fb.Host, fb.Port}); !slices.Contains(hosts, hp) {
			hosts = append(hosts, hp)
			socket = socket || strings.HasPrefix(fb.Host, "/")
		}
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database}
	if socket {
		// A socket directory cannot go in the URL's host part, so every
		// host goes in the query, comma-separated as libpq reads it.
		names, ports := make([]string, len(hosts)), make([]string, len(hosts))
		for i, hp := range hosts {
			names[i] = url.QueryEscape(hp.host)
			ports[i] = strconv.Itoa(int(hp.port))
		}
		u.RawQuery = "host=" + strings.Join(names, ",") + "&port=" + strings.Join(ports, ",")
	} else {
		addrs := make([]string, len(hosts))
		for i, hp := range hosts {
			addrs[i] = net.JoinHostPort(hp.host, strconv.Itoa(int(hp.port)))
		}
		u.Host = strings.Join(addrs, ",")
	}
	return u.String()
}

// InSnapshot runs fn in a read-only transaction whose statements all see
// the same committed data, so that, say, a page and its total agree: under
// Postgres's default READ COMMITTED each statement sees what had committed
// by its own start, and a row written between the two is counted and not
// shown.
func InSnapshot(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// CloseBudget is the most Close waits for the pool to close. Deployment
// budgets (terminationGracePeriodSeconds) count it after the HTTP drain.
const CloseBudget = time.Second

// Close closes pool once the service has stopped serving, waiting at most
// CloseBudget. pgx waits for every connection to be released and gives
// each up to 15 s to close; with the database hung that would overrun the
// pod's grace period, and the kubelet's SIGKILL would lose the final flush
// of telemetry. The process is exiting: whatever is still open, the kernel
// closes.
func Close(pool *pgxpool.Pool) error {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
		return nil
	case <-time.After(CloseBudget):
		return fmt.Errorf("database connections were still closing after %s; left to the process's exit", CloseBudget)
	}
}

// MigrationsIn is the folder dir of fsys (a service's embedded files) as
// the file system Open and pgtest take: goose SQL files at its root. It
// panics only when dir is missing, which is a build bug.
func MigrationsIn(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
