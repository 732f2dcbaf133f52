package pgtest

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errRollBack ends the transaction of ExplainGenerated, whose setup must
// not last.
var errRollBack = errors.New("roll back")

// ExplainGenerated plans the query sqlc generated as the constant name in
// the file generated (db/queries.sql.go, say) with args, after the
// statements of setup (SET LOCAL enable_seqscan = off; DROP INDEX ...) in
// a transaction that is rolled back, and returns the plan's text. Tests
// hold the plan to the index a query must use: the generated text, not a
// copy of it, so a query changed without its index fails.
func ExplainGenerated(t testing.TB, pool *pgxpool.Pool, generated, name, setup string, args ...any) string {
	t.Helper()
	source, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)const " + regexp.QuoteMeta(name) + " = `(.*?)`").FindSubmatch(source)
	if m == nil {
		t.Fatalf("no query %s in %s", name, generated)
	}
	ctx := context.Background()
	var plan []string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if setup != "" {
			if _, err := tx.Exec(ctx, setup); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+string(m[1]), args...)
		if err != nil {
			return err
		}
		if plan, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatalf("explain %s: %v", name, err)
	}
	return strings.Join(plan, "\n")
}
