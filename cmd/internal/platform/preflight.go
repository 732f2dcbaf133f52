package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/libs/postgres"
)

// preflight checks every dependency and reports all failures at once, each
// with where it looked and how to start the missing piece on this machine.
func preflight(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var errs []error
	if err := pingPostgres(ctx, opts.PGURL); err != nil {
		errs = append(errs, fmt.Errorf("Postgres is not answering at %s (set PG_URL or -pg-url to use another server): %w\n    start it with: %s",
			postgres.Redact(opts.PGURL), err, postgresStartHint))
	}
	if err := pingRedis(ctx, opts.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("Redis is not answering at %s (set REDIS_URL or -redis-url to use another server): %w\n    start it with: %s",
			redactRedis(opts.RedisURL), err, redisStartHint))
	}
	for _, s := range []struct{ name, addr string }{
		{Gateway, opts.GatewayAddr}, {Accounts, opts.AccountsAddr}, {Catalogue, opts.CatalogueAddr},
	} {
		if err := checkPortFree(s.name, s.addr); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("preflight failed:\n  %w", joinLines(errs))
	}
	return nil
}

func pingPostgres(ctx context.Context, pgURL string) error {
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	var dialErr *net.OpError
	if errors.As(err, &dialErr) {
		// pgx lists one line per address and TLS attempt; the dial error
		// says it all.
		return dialErr
	}
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

func pingRedis(ctx context.Context, redisURL string) error {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	// A plain dial first: go-redis retries and logs every failed dial on
	// its own, which would bury the one line that matters here.
	var d net.Dialer
	conn, err := d.DialContext(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	conn.Close()
	opts.MaxRetries = -1
	client := redis.NewClient(opts)
	defer client.Close()
	return client.Ping(ctx).Err()
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
