package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/libs/postgres"
)

// The control of the order rows: Postgres itself, through pgbench, doing
// the writes of one order in one transaction on the same server, with no
// service, network hop or JSON in between. An order through the platform
// can only be slower; how much slower is what the order target judges.

// pgbenchDatabase is the scratch database the control writes to, next to
// the platform's esim_ databases. Its tables are made anew every run.
const pgbenchDatabase = "esim_bench_pgbench"

// pgbenchSchema is an order's tables cut to what the transaction writes:
// the keys and unique indexes the services' tables also maintain, and a
// balance for each of pgbenchAccounts accounts. The one-account control
// debits the first, as every bench order debits the demo partner's; the
// many-account control spreads its clients over all of them, as the
// many-partner row spreads its workers.
var pgbenchSchema = `
DROP TABLE IF EXISTS esims, ledger, orders, balances;
CREATE TABLE balances (
    account_id   int PRIMARY KEY,
    amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
    updated_at   timestamptz NOT NULL
);
CREATE TABLE orders (
    id              uuid PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    status          text NOT NULL,
    quantity        int NOT NULL,
    total_minor     bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE TABLE ledger (
    id                  uuid PRIMARY KEY,
    account_id          int NOT NULL REFERENCES balances,
    amount_minor        bigint NOT NULL,
    reference           text NOT NULL UNIQUE,
    balance_after_minor bigint NOT NULL,
    created_at          timestamptz NOT NULL
);
CREATE TABLE esims (
    id         uuid PRIMARY KEY,
    order_id   uuid NOT NULL REFERENCES orders,
    iccid      text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);
INSERT INTO balances SELECT g, 9000000000000000000, now() FROM generate_series(1, ` + strconv.Itoa(pgbenchAccounts) + `) g;
`

// pgbenchAccounts is how many partners order at once in the many-partner
// rows, and how many balances their control debits.
const pgbenchAccounts = 64

// pgbenchOrderPrice is what the control's order debits, in minor units.
const pgbenchOrderPrice = 500

// pgbenchScript is one order of one eSIM of the first account: five
// writes, one commit. With -M prepared the :variables are parameters, so
// they need no quoting.
var pgbenchScript = "\\set account 1\n" + pgbenchOrder

// pgbenchManyScript is the same order of the client's own account, client
// n of pgbenchAccounts ordering for account n as the bench's worker n does.
var pgbenchManyScript = "\\set account 1 + :client_id % " + strconv.Itoa(pgbenchAccounts) + "\n" + pgbenchOrder

// pgbenchOrder is the order's transaction, debiting :account.
var pgbenchOrder = `BEGIN;
INSERT INTO orders (id, idempotency_key, status, quantity, total_minor, created_at, updated_at) VALUES (gen_random_uuid(), gen_random_uuid()::text, 'pending', 1, ` + strconv.Itoa(pgbenchOrderPrice) + `, now(), now()) RETURNING id AS order_id \gset
UPDATE balances SET amount_minor = amount_minor - ` + strconv.Itoa(pgbenchOrderPrice) + `, updated_at = now() WHERE account_id = :account RETURNING amount_minor AS balance_after \gset
INSERT INTO ledger (id, account_id, amount_minor, reference, balance_after_minor, created_at) VALUES (gen_random_uuid(), :account, ` + strconv.Itoa(pgbenchOrderPrice) + `, :order_id, :balance_after, now());
INSERT INTO esims (id, order_id, iccid, created_at) VALUES (gen_random_uuid(), :order_id, gen_random_uuid()::text, now());
UPDATE orders SET status = 'completed', updated_at = now() WHERE id = :order_id;
END;
`

// pgbenchInstallHint says where pgbench comes from. Debian and Ubuntu ship
// it with the server (postgresql-15 here), which postgresql-contrib pulls
// in; PGDG's packages likewise.
const pgbenchInstallHint = "install it with the Postgres server's packages: `apt-get install postgresql-contrib` " +
	"(Debian and Ubuntu ship pgbench in postgresql-<version>, e.g. postgresql-15, which it pulls in), or put a pgbench on PATH; " +
	"-only plans runs without it"

// findPgbench returns pgbench on PATH, else the newest under
// /usr/lib/postgresql/*/bin.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	newest, newestVersion := "", -1
	for _, p := range found {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		if err == nil && v > newestVersion {
			newest, newestVersion = p, v
		}
	}
	if newest == "" {
		return "", errors.New("pgbench not found (the order rows compare with it): " + pgbenchInstallHint)
	}
	return newest, nil
}

// pgbench runs the control against one database.
type pgbench struct {
	path string
	// env is the connection, as libpq reads it: the password never shows
	// on a command line.
	env    []string
	dir    string // the latency logs
	script string // the transaction, a file
}

// pgbenchConnEnv gives libpq the connection of databaseURL.
func pgbenchConnEnv(databaseURL string) ([]string, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", postgres.Redact(databaseURL), err)
	}
	env := []string{
		"PGHOST=" + cfg.Host, "PGPORT=" + strconv.Itoa(int(cfg.Port)),
		"PGUSER=" + cfg.User, "PGDATABASE=" + cfg.Database,
	}
	if cfg.Password != "" {
		env = append(env, "PGPASSWORD="+cfg.Password)
	}
	// Both default to prefer; a mode the URL names is libpq's too.
	if u, err := url.Parse(databaseURL); err == nil && u.Query().Get("sslmode") != "" {
		env = append(env, "PGSSLMODE="+u.Query().Get("sslmode"))
	}
	return env, nil
}

// withoutLibpqSettings is environ without the PG* variables libpq reads,
// so that only the URL decides where pgbench connects.
func withoutLibpqSettings(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}

// databaseURL returns serverURL pointing at database name instead, as the
// platform names its services' databases.
func databaseURL(serverURL, name string) (string, error) {
	if !strings.HasPrefix(serverURL, "postgres://") && !strings.HasPrefix(serverURL, "postgresql://") {
		return "", errors.New("-pg-url is in key=value form; give it as a postgres:// URL")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", errors.New("-pg-url is not a valid postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// preparePgbench creates the scratch database named name on the server of
// serverURL, makes its tables anew and writes script, an order-shaped one.
func preparePgbench(ctx context.Context, serverURL, name, dir, script string) (*pgbench, error) {
	return prepareControl(ctx, serverURL, name, dir, "pgbench's", pgbenchSchema, "order.sql", script)
}

// prepareControl creates a pgbench control's scratch database, name on the
// server of serverURL, runs schema in it (its tables made anew) and writes
// script into dir as file. what names the control in errors.
func prepareControl(ctx context.Context, serverURL, name, dir, what, schema, file, script string) (*pgbench, error) {
	path, err := findPgbench()
	if err != nil {
		return nil, err
	}
	db, err := databaseURL(serverURL, name)
	if err != nil {
		return nil, err
	}
	if err := postgres.EnsureDatabase(ctx, db); err != nil {
		return nil, fmt.Errorf("%s database: %w", what, err)
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("%s database: %w", what, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET client_min_messages = warning;"+schema); err != nil {
		return nil, fmt.Errorf("%s tables: %w", what, err)
	}
	env, err := pgbenchConnEnv(db)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	scriptPath := filepath.Join(dir, file)
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		return nil, err
	}
	return &pgbench{path: path, env: env, dir: dir, script: scriptPath}, nil
}

// maxClients is how many more connections the server takes, less
// headroom for the platform's pools and whoever else shares the server:
// pgbench at more clients than that would fail, not slow down.
func maxClients(ctx context.Context, serverURL string) (int, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return 0, fmt.Errorf("postgres at %s: %w", postgres.Redact(serverURL), err)
	}
	defer conn.Close(ctx)
	var free int
	err = conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).Scan(&free)
	if err != nil {
		return 0, fmt.Errorf("count Postgres's free connections: %w", err)
	}
	const headroom = 10
	if free-headroom < 1 {
		return 0, fmt.Errorf("postgres at %s has only %d free connections: too few for pgbench", postgres.Redact(serverURL), free)
	}
	return free - headroom, nil
}

// run runs the script with clients connections for d (whole seconds, at
// least one), and returns its transactions as a result: RPS is pgbench's
// tps without the initial connection time, the latencies are each
// transaction's from the latency log. extra are further pgbench options.
func (b *pgbench) run(ctx context.Context, clients int, d time.Duration, extra ...string) (result, error) {
	logs, err := os.MkdirTemp(b.dir, "latency-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(logs)
	secs := max(1, int(math.Ceil(d.Seconds())))
	cmd := exec.CommandContext(ctx, b.path, "-n", "-f", b.script,
		"-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)), "-T", strconv.Itoa(secs), "-M", "prepared",
		"-l", "--log-prefix", filepath.Join(logs, "tx"))
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(withoutLibpqSettings(os.Environ()), b.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("pgbench -c %d: %w: %s", clients, err, strings.TrimSpace(stderr.String()+"\n"+stdout.String()))
	}
	sum, err := parsePgbench(stdout.String())
	if err != nil {
		return result{}, err
	}
	files, _ := filepath.Glob(filepath.Join(logs, "tx.*"))
	var lat []time.Duration
	for _, f := range files {
		l, err := readPgbenchLog(f)
		if err != nil {
			return result{}, err
		}
		lat = append(lat, l...)
	}
	return pgbenchResult(sum, lat), nil
}

// pgbenchSummary is what pgbench prints at the end of a run.
type pgbenchSummary struct {
	processed int // successful transactions
	failed    int
	tps       float64 // without the initial connection time
}

var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// parsePgbench reads pgbench's summary (pgbench 14 and later; 15 added the
// failed transactions).
func parsePgbench(out string) (pgbenchSummary, error) {
	var s pgbenchSummary
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("pgbench printed no %q line (pgbench 14 or later needed): %s", "tps = N (without initial connection time)", strings.TrimSpace(out))
	}
	var err error
	if s.tps, err = strconv.ParseFloat(m[1], 64); err != nil {
		return s, fmt.Errorf("pgbench's tps %q: %w", m[1], err)
	}
	m = pgbenchProcessed.FindStringSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("pgbench printed no count of transactions processed: %s", strings.TrimSpace(out))
	}
	if s.processed, err = strconv.Atoi(m[1]); err != nil {
		return s, err
	}
	if m = pgbenchFailed.FindStringSubmatch(out); m != nil {
		s.failed, _ = strconv.Atoi(m[1])
	}
	return s, nil
}

// readPgbenchLog reads the latencies of one latency log of -l: "client
// transaction latency script epoch microseconds" a line, the latency in
// microseconds, or "failed" (pgbench 15) where the summary counts the
// transaction as failed.
func readPgbenchLog(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lat []time.Duration
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 {
			continue
		}
		if us, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
	}
	return lat, s.Err()
}

// pgbenchResult is a pgbench run as a load phase: its elapsed time is what
// makes the rate pgbench's own tps, which leaves out the connections'
// set-up.
func pgbenchResult(s pgbenchSummary, lat []time.Duration) result {
	res := result{Requests: s.processed + s.failed, Errors: s.failed}
	if s.failed > 0 {
		res.FirstErr = fmt.Sprintf("%d failed transactions", s.failed)
	}
	if s.tps > 0 {
		res.Elapsed = time.Duration(float64(s.processed) / s.tps * float64(time.Second))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50 = lat[(len(lat)-1)*50/100]
		res.P99 = lat[(len(lat)-1)*99/100]
	}
	return res
}
