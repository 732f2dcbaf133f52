package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/libs/postgres"
)

// preflight checks every dependency and reports all failures at once, each
// with where it looked and what to do about it on this machine.
func preflight(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var errs []error
	if err := checkPostgres(ctx, opts.PGURL, opts.install); err != nil {
		errs = append(errs, err)
	}
	if err := checkRedis(ctx, opts.RedisURL, opts.install); err != nil {
		errs = append(errs, err)
	}
	for _, s := range opts.Services {
		if err := checkPortFree(s.Name, opts.Addrs[s.Name]); err != nil {
			errs = append(errs, err)
		}
		for _, v := range slices.Sorted(maps.Keys(s.Listeners)) {
			if err := checkPortFree(s.ListenerKey(v), opts.Addrs[s.ListenerKey(v)]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("preflight failed:\n  %w", joinLines(errs))
	}
	return nil
}

// checkPostgres connects to pgURL and, when that fails, tells apart the
// cases that need different fixes: a URL that does not parse, a server
// that is not there (start it), a server that answers but refuses the login
// (fix the URL; starting it again would not help) and one that answers but
// with which the connection fails before a login, as TLS does when sslmode
// asks for what the server cannot give (fix sslmode). install is where the
// hint for a missing server looks for a Postgres to start.
func checkPostgres(ctx context.Context, pgURL string, install *localInstall) error {
	if err := postgres.CheckURL(pgURL); err != nil {
		return fmt.Errorf("PG_URL: %w", err)
	}
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return fmt.Errorf("PG_URL is not a valid Postgres URL: %s\n    set PG_URL or -pg-url to one like %s",
			parseProblem(err), DefaultPGURL)
	}
	where := postgres.Redact(pgURL)
	answered, err := pingPostgres(ctx, cfg)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The server answered: it is up, and the error is its own words.
		// pgx reports it once per address and TLS attempt; once is enough.
		if credentialsProblem(pgErr.Code) {
			return fmt.Errorf("Postgres at %s refused the connection: %w\n    check the user, password and database in PG_URL (or -pg-url)",
				where, pgErr)
		}
		return fmt.Errorf("Postgres at %s refused the connection: %w", where, pgErr)
	}
	if answered {
		// Something took the connection, so starting Postgres is not the
		// fix; what failed is most often TLS ("server refused TLS
		// connection", a certificate sslmode=verify-* does not accept).
		return fmt.Errorf("Postgres at %s answered but the connection failed: %w\n    check the sslmode and TLS settings in PG_URL (or -pg-url)",
			where, connectCause(err))
	}
	return fmt.Errorf("Postgres is not answering at %s (set PG_URL or -pg-url to use another server): %w\n    %s",
		where, connectCause(err), install.postgresStartHint(cfg.Host, cfg.Port))
}

// pingPostgres connects with cfg and pings. answered says whether any dial
// reached a listener: when none did, every attempt failed at the dial
// (connection refused, no such host or socket, a timeout while connecting)
// and Postgres is not there; when one did, what failed came after it. The
// dial is watched rather than the error read because pgx turns a dial
// timed out by the context into the same error as a TLS handshake timed
// out, and reports a certificate pgx turns down as a failed write.
func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) (answered bool, err error) {
	var dialed atomic.Bool
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			dialed.Store(true)
		}
		return conn, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return dialed.Load(), err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return true, conn.Ping(ctx)
}

// credentialsProblem reports whether a server's refusal is about what
// PG_URL names: the role, its password or the database.
func credentialsProblem(sqlstate string) bool {
	return strings.HasPrefix(sqlstate, "28") || // invalid_authorization_specification, invalid_password
		sqlstate == "3D000" // invalid_catalog_name: no such database
}

// connectCause is why a connection attempt failed, said once: pgx lists one
// line per address and TLS attempt, and they are usually the same.
func connectCause(err error) error {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		// The rest of ConnectError's text is the user and database, which
		// the message says already.
		err = connErr.Unwrap()
	}
	return &causeError{msg: sayOnce(err), err: err}
}

// sayOnce is err's text with repeated branches of joined errors given once,
// and a failed dial said as net says it, which names the address.
func sayOnce(err error) string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var distinct []string
		for _, e := range joined.Unwrap() {
			if s := sayOnce(e); !slices.Contains(distinct, s) {
				distinct = append(distinct, s)
			}
		}
		return strings.Join(distinct, "; ")
	}
	if dialErr := dialFailure(err); dialErr != nil {
		// Not pgx's "127.0.0.1:1 (127.0.0.1): dial error: " before it: net
		// names the address already.
		return dialErr.Error()
	}
	if inner := errors.Unwrap(err); inner != nil {
		// A wrapping error whose text ends with the wrapped one's.
		if prefix, ok := strings.CutSuffix(err.Error(), inner.Error()); ok {
			return prefix + sayOnce(inner)
		}
	}
	return err.Error()
}

// dialFailure is the failed dial err wraps, if any, looking no further than
// a join: each branch of one is a different attempt.
func dialFailure(err error) *net.OpError {
	for ; err != nil; err = errors.Unwrap(err) {
		if opErr, ok := err.(*net.OpError); ok && opErr.Op == "dial" {
			return opErr
		}
	}
	return nil
}

// causeError is an error with its text rewritten for a one-line message.
type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

// parseProblem is what is wrong with an unparsable PG_URL, without quoting
// it: pgx masks the passwords it recognises, but only on a best-effort basis
// for malformed input.
func parseProblem(err error) string {
	msg := err.Error()
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		// "cannot parse `<input>`: <problem>"
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			return msg[i+len("`: "):]
		}
		return "cannot parse it"
	}
	return msg
}

// checkRedis is checkPostgres for Redis: an unparsable URL, a Redis that is
// not there and one that answers but refuses (NOAUTH, WRONGPASS, a database
// number out of range) each get their own message.
func checkRedis(ctx context.Context, redisURL string, install *localInstall) error {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		// net/url's errors quote the whole URL, password included.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return fmt.Errorf("REDIS_URL is not a valid Redis URL: %w\n    set REDIS_URL or -redis-url to one like %s", err, DefaultRedisURL)
	}
	where := redactRedis(redisURL)
	// A plain dial first: go-redis retries and logs every failed dial on
	// its own, which would bury the one line that matters here.
	var d net.Dialer
	conn, err := d.DialContext(ctx, opts.Network, opts.Addr)
	if err != nil {
		return fmt.Errorf("Redis is not answering at %s (set REDIS_URL or -redis-url to use another server): %w\n    %s",
			where, err, install.redisStartHint(opts))
	}
	conn.Close()
	opts.MaxRetries = -1
	client := redis.NewClient(opts)
	defer client.Close()
	err = client.Ping(ctx).Err()
	var redisErr redis.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &redisErr):
		return fmt.Errorf("Redis at %s refused the connection: %w\n    check the user, password and database number in REDIS_URL (or -redis-url)",
			where, redisErr)
	default:
		// Something accepted the connection but did not speak Redis to us.
		return fmt.Errorf("Redis at %s accepted the connection but did not answer PING (is another program listening there?): %w",
			where, err)
	}
}

// isLoopback reports whether host names this machine over loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redactRedis hides a Redis password the way postgres.Redact does for
// Postgres URLs.
func redactRedis(redisURL string) string {
	u, err := url.Parse(redisURL)
	if err != nil {
		return "(unparseable REDIS_URL)"
	}
	return u.Redacted()
}

// joinLines is errors.Join with an indented separator, so a multi-failure
// preflight reads as a list.
func joinLines(errs []error) error {
	err := errs[0]
	for _, e := range errs[1:] {
		err = fmt.Errorf("%w\n  %w", err, e)
	}
	return err
}
