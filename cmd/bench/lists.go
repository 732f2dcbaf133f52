package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// onlyLists is the list rows: GET /v1/orders, /v1/esims and /v1/events
// for an account of a thousand rows and one of a million (issue 33).
const onlyLists = "lists"

// The two partners of the list rows. Fixed ids: their rows are seeded
// once per machine (orders and eSIMs are never deleted) and found again
// by every later run.
var listAccounts = []listAccount{
	{name: "small", id: "0b6f5c3e-4d1a-5b7e-9c2f-000000001000", rows: 1_000, iccidTag: "0001"},
	{name: "big", id: "0b6f5c3e-4d1a-5b7e-9c2f-000001000000", rows: 1_000_000, iccidTag: "0002"},
}

type listAccount struct {
	name string
	id   string
	rows int
	// iccidTag sets the account's ICCIDs apart from every other's.
	iccidTag string
}

// listPageLimit is the contract's largest page: every request renders
// the same number of rows, whatever the account.
const listPageLimit = 100

// listPositions place the pages measured: each page's offset is this
// share of the account's rows. The first page; the middle one, the
// farthest from both ends of the list; and a deep one.
var listPositions = []float64{0, 0.5, 0.9}

// listDeepFraction is the deep page's position.
const listDeepFraction = 0.9

// targetListRatio is the goal: the big account's p50 at most this many
// times the small one's, for every list and page.
const targetListRatio = 1.5

// listDuration bounds each list measurement (a closed loop of one
// worker): eighteen of them run, and they do not need -duration's length to
// settle a p50.
const listDuration = 3 * time.Second

var listEndpoints = []string{"orders", "esims", "events"}

type listRow struct {
	endpoint string
	// position is the page's offset as a share of the rows.
	position float64
	// pages are the page numbers asked for, and small and big the two
	// accounts' results.
	smallPage, bigPage int
	small, big         result
}

func (r listRow) ratio() float64 {
	if r.small.P50 <= 0 {
		return 0
	}
	return float64(r.big.P50) / float64(r.small.P50)
}

func (r listRow) met() bool {
	return r.small.Errors+r.big.Errors == 0 && r.big.Requests > 0 && r.ratio() <= targetListRatio
}

type listResults struct {
	rows   []listRow
	seeded time.Duration // 0 when the rows were there already
}

// listsPhase seeds the two accounts (once per machine) and measures each
// list's first page and a deep page through the gateway for both.
func listsPhase(ctx context.Context, cfg config, p *platform.Platform, say func(string, ...any)) (res listResults, err error) {
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
	accounts := accountsv1.NewAccountsProtobufClient(p.URL(platform.Accounts), operator)
	keys := map[string]string{}
	for _, a := range listAccounts {
		_, err := accounts.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: a.id, Name: "Bench lists " + a.name, Currency: "USD"})
		var twerr twirp.Error
		if err != nil && !(errors.As(err, &twerr) && twerr.Code() == twirp.AlreadyExists) {
			return res, fmt.Errorf("lists: account %s: %w", a.name, err)
		}
		key, err := accounts.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.id, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Name: "bench-lists"})
		if err != nil {
			return res, fmt.Errorf("lists: key of %s: %w", a.name, err)
		}
		keys[a.name] = key.GetSecret()
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, rerr := accounts.RevokeKey(stopCtx, &accountsv1.RevokeKeyRequest{AccountId: a.id, KeyId: key.GetKey().GetId()}); rerr != nil {
				err = errors.Join(err, fmt.Errorf("lists: revoke key of %s: %w", a.name, rerr))
			}
		}()
	}

	started := time.Now()
	orderingURL, err := databaseURL(cfg.pgURL, "esim_ordering")
	if err != nil {
		return res, err
	}
	webhookURL, err := databaseURL(cfg.pgURL, "esim_webhook")
	if err != nil {
		return res, err
	}
	seeded, err := seedLists(ctx, orderingURL, webhookURL, listAccounts, say)
	if err != nil {
		return res, err
	}
	if seeded {
		res.seeded = time.Since(started)
	}

	for _, endpoint := range listEndpoints {
		for _, position := range listPositions {
			row := listRow{endpoint: endpoint, position: position}
			for _, a := range listAccounts {
				page := int(float64(a.rows)*position)/listPageLimit + 1
				url := fmt.Sprintf("%s/%s?limit=%d&page=%d", p.APIBaseURL, endpoint, listPageLimit, page)
				t, err := newTarget("GET /v1/"+endpoint+" "+a.name, url, keys[a.name])
				if err != nil {
					return res, err
				}
				// One request unmeasured, read whole: the first pays for
				// connections and cold caches, which is not what a row
				// compares, and a page that is not full or a total that is
				// not the account's rows would make the row meaningless.
				if err := checkListPage(ctx, url, keys[a.name], a.rows); err != nil {
					return res, fmt.Errorf("lists: %s account: %w", a.name, err)
				}
				r := closedLoop(ctx, t, 1, listDuration)
				say("lists: GET /v1/%s page %d, %s account (%d rows): p50 %s, p99 %s, %d requests, %d errors %s",
					endpoint, page, a.name, a.rows, ms(r.P50), ms(r.P99), r.Requests, r.Errors, r.FirstErr)
				if a.name == "small" {
					row.small, row.smallPage = r, page
				} else {
					row.big, row.bigPage = r, page
				}
				if err := ctx.Err(); err != nil {
					return res, fmt.Errorf("interrupted: %w", err)
				}
			}
			res.rows = append(res.rows, row)
		}
	}
	return res, nil
}

// checkListPage fetches a page and checks it is full and counts the
// account's rows.
func checkListPage(ctx context.Context, url, key string, rows int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var page struct {
		Data       []json.RawMessage `json:"data"`
		Pagination struct {
			Total int `json:"total"`
		} `json:"pagination"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if len(page.Data) != listPageLimit || page.Pagination.Total != rows {
		return fmt.Errorf("GET %s: %d items of %d in all, want %d of %d", url, len(page.Data), page.Pagination.Total, listPageLimit, rows)
	}
	return nil
}

// seedLists gives each list account its rows, unless it has them: in
// ordering's database an order of one eSIM per row, in the webhook
// service's an order.completed event per order. One INSERT ... SELECT per
// table in one transaction per database, with the triggers off
// (session_replication_role): the rows are made whole and consistent
// here, and the per-row deferred checks would cost more than the inserts.
func seedLists(ctx context.Context, orderingURL, webhookURL string, accounts []listAccount, say func(string, ...any)) (seeded bool, err error) {
	for _, db := range []struct {
		name  string
		url   string
		count string
		seed  []string
		// totals is the table of the lists' totals, and addTotals what
		// adds the seeded rows to it: the triggers that keep it are off
		// while seeding. A release without the table has nothing to add.
		totals, addTotals string
	}{
		{"ordering", orderingURL, "SELECT count(*) FROM orders WHERE account_id = $1", []string{seedOrdersSQL, seedEsimsSQL}, "list_totals", seedListTotalsSQL},
		{"webhook", webhookURL, "SELECT count(*) FROM events WHERE account_id = $1", []string{seedEventsSQL}, "event_totals", seedEventTotalsSQL},
	} {
		conn, err := pgx.Connect(ctx, db.url)
		if err != nil {
			return seeded, fmt.Errorf("lists: %s: %w", db.name, err)
		}
		err = func() error {
			defer conn.Close(context.WithoutCancel(ctx))
			for _, a := range accounts {
				var have int
				if err := conn.QueryRow(ctx, db.count, a.id).Scan(&have); err != nil {
					return fmt.Errorf("lists: count %s's rows in %s: %w", a.name, db.name, err)
				}
				if have == a.rows {
					continue
				}
				if have != 0 {
					return fmt.Errorf("lists: account %s has %d rows in %s, not 0 or %d; its rows are never deleted, so give the list accounts new ids", a.name, have, db.name, a.rows)
				}
				say("lists: seeding %d rows for the %s account in %s", a.rows, a.name, db.name)
				began := time.Now()
				if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
						return err
					}
					var hasTotals bool
					if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", db.totals).Scan(&hasTotals); err != nil {
						return err
					}
					seed := db.seed
					if hasTotals {
						seed = append(slices.Clone(seed), db.addTotals)
					}
					for _, q := range seed {
						if _, err := tx.Exec(ctx, q, pgx.NamedArgs{"account": a.id, "rows": a.rows, "tag": a.iccidTag}); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return fmt.Errorf("lists: seed %s in %s: %w", a.name, db.name, err)
				}
				seeded = true
				say("lists: seeded %s in %s in %s", a.name, db.name, time.Since(began).Round(time.Millisecond))
			}
			// Fresh statistics and visibility map, as autovacuum would
			// leave them on tables this size.
			for _, table := range []string{"orders", "esims", "events"} {
				if db.name == "webhook" && table != "events" || db.name == "ordering" && table == "events" {
					continue
				}
				if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
					return fmt.Errorf("lists: vacuum %s: %w", table, err)
				}
			}
			return nil
		}()
		if err != nil {
			return seeded, err
		}
	}
	return seeded, nil
}

// The seed statements take @account, @rows (how many) and @tag (the
// account's ICCID tag). Row i (from 0) is created i seconds before a fixed
// instant, so lists put row 0 first, and every id derives from the
// account and i, so the eSIMs and events find their order.
const (
	seedOrdersSQL = `
INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes,
    validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at, updated_at)
SELECT md5(@account::text || 'order' || i)::uuid, @account::uuid, 'sandbox', sha256((@account::text || i)::bytea),
    '0b6f5c3e-4d1a-5b7e-9c2f-00000000a1a1', 'Bench plan', false, false, 1073741824,
    30, 1, 0, 'USD', 500, 500, 'completed', ts, ts
FROM generate_series(0, @rows::int - 1) AS i, LATERAL (SELECT timestamptz '2026-01-01 00:00:00Z' - i * interval '1 second' AS ts) t`

	// The ICCID is 89999999, the tag, i in 6 digits and the Luhn check
	// digit: the body's digits from the right are i's six, then the
	// prefix's twelve, every other one doubled starting with the last.
	seedEsimsSQL = `
INSERT INTO esims (id, order_id, account_id, environment, position, plan_name, iccid, matching_id, smdp_address,
    qr_token, status, validity_days, unlimited, total_bytes, data_updated_at, created_at, plan_id, per_day)
SELECT md5(@account::text || 'esim' || i)::uuid, md5(@account::text || 'order' || i)::uuid, @account::uuid, 'sandbox', 0, 'Bench plan',
    body || ((10 - (luhn % 10)) % 10)::text, 'BENCH-' || @tag::text || '-' || i, 'smdp.bench.invalid',
    rpad('bench' || @tag::text || i, 43, 'x'), 'ALLOCATED', 30, false, 1073741824, ts, ts,
    '0b6f5c3e-4d1a-5b7e-9c2f-00000000a1a1', false
FROM generate_series(0, @rows::int - 1) AS i,
    LATERAL (SELECT timestamptz '2026-01-01 00:00:00Z' - i * interval '1 second' AS ts,
                    '89999999' || @tag::text || lpad(i::text, 6, '0') AS body) t,
    LATERAL (SELECT sum(CASE WHEN k % 2 = 1 THEN (2 * d) / 10 + (2 * d) % 10 ELSE d END) AS luhn
             FROM (SELECT k, substr(body, 19 - k, 1)::int AS d FROM generate_series(1, 18) AS k) digits) l`

	seedListTotalsSQL = `
INSERT INTO list_totals (account_id, environment, list, total)
VALUES (@account::uuid, 'sandbox', 'orders', @rows::int), (@account::uuid, 'sandbox', 'esims', @rows::int)
ON CONFLICT (account_id, environment, list, slot) DO UPDATE SET total = list_totals.total + EXCLUDED.total`

	seedEventTotalsSQL = `
INSERT INTO event_totals (account_id, environment, total) VALUES (@account::uuid, 'sandbox', @rows::int)
ON CONFLICT (account_id, environment) DO UPDATE SET total = event_totals.total + EXCLUDED.total`

	seedEventsSQL = `
INSERT INTO events (id, type, account_id, environment, order_id, created_at, payload, status, url)
SELECT 'evt_' || md5(@account::text || 'event' || i), 'order.completed', @account::uuid, 'sandbox',
    md5(@account::text || 'order' || i)::uuid, timestamptz '2026-01-01 00:00:00Z' - i * interval '1 second',
    '{"seeded":true}', 'no_endpoint', NULL
FROM generate_series(0, @rows::int - 1) AS i`
)

// listsSection names the list rows' section, in its heading and in the
// Goals table.
const listsSection = "Lists at scale"

// section is the report's list rows.
func (l *listResults) section(p func(string, ...any)) {
	p("## %s\n\n", listsSection)
	methodLine(p, "lists-at-scale", "`GET /v1/orders`, `/v1/esims` and `/v1/events` through the gateway with `limit=%d` for an account of %d rows and one of %d: the first page and those at %.0f%% and %.0f%% of the rows, one worker for %s each",
		listPageLimit, listAccounts[0].rows, listAccounts[1].rows, listPositions[1]*100, listPositions[2]*100, listDuration)
	p("| list | page (small / big) | small p50 | small p99 | big p50 | big p99 | big / small p50 |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range l.rows {
		p("| GET /v1/%s | %d / %d | %s | %s | %s | %s | %.2f |\n", r.endpoint, r.smallPage, r.bigPage,
			ms(r.small.P50), ms(r.small.P99), ms(r.big.P50), ms(r.big.P99), r.ratio())
	}
	p("\n")
	var notes []string
	if l.seeded > 0 {
		notes = append(notes, fmt.Sprintf("Seeded this run in %s.", l.seeded.Round(time.Second)))
	}
	for _, r := range l.rows {
		if r.small.Errors+r.big.Errors > 0 {
			notes = append(notes, fmt.Sprintf("GET /v1/%s: %d errors (e.g. %s).", r.endpoint, r.small.Errors+r.big.Errors, firstOf(r.small.FirstErr, r.big.FirstErr)))
		}
	}
	if len(notes) > 0 {
		p("%s\n\n", strings.Join(notes, " "))
	}
}

// goals are one goal per list and page (met).
func (l *listResults) goals() []goal {
	gs := make([]goal, 0, len(l.rows))
	for _, r := range l.rows {
		gs = append(gs, goal{section: listsSection, name: fmt.Sprintf("GET /v1/%s page %d / %d, big / small p50", r.endpoint, r.smallPage, r.bigPage),
			measured: fmt.Sprintf("%.2f", r.ratio()), want: fmt.Sprintf("<= %.1f", targetListRatio), met: r.met()})
	}
	return gs
}
