package main

import (
	"fmt"
	"strings"
)

// The order rows' goals (issue 20): orders at a quarter of what Postgres
// alone commits of their writes, reads at a quarter of a bare handler, and
// an order of 50 eSIMs at most five times the cost of one of one.
const (
	targetOrderRatio = 0.25
	targetReadRatio  = 0.25
	targetFiftyCost  = 5.0
)

// rows are the order rows, in the order they are measured.
func (o *orderResults) rows() []measurement {
	return []measurement{o.createOne, o.createFifty, o.pgbench, o.readGateway, o.readBare}
}

// method says how the order rows were measured.
func (o *orderResults) method(p func(string, ...any), cfg config) {
	p("- **Orders**: `POST /v1/orders` of one eSIM of the fixed plan %s through the gateway, each a real sandbox order with its own `Idempotency-Key` ", o.planID)
	p("(key checked, rate-limited, priced from the catalogue, debited by the wallet, issued by the sandbox provider; the orders stay in the bench's databases), ")
	p("against pgbench on the same Postgres running an order's writes in one transaction (insert the order pending, debit one balance, insert a ledger row and an eSIM, complete the order; ")
	p("`-M prepared`, as many clients as workers up to the %d connections the server had to spare, p50 and p99 from its per-transaction log); ", o.pgbenchMaxClients)
	p("then orders of 50 eSIMs at the concurrency best for one, whose cost is how many times fewer of them complete per second.\n")
	p("- **Order reads**: `GET /v1/orders/{id}` of a one-eSIM order (%d-byte JSON answer) through the gateway against a second bare handler serving the same bytes; ", o.orderBytes)
	p("every order row is closed loops only (%s warm-up, then %s workers for %s each, the best kept as the maximum), with no open loop.\n", cfg.warmup, joinInts(cfg.workers), cfg.duration)
}

// fiftyCost is how many times more a 50-eSIM order costs than a 1-eSIM
// one: orders of one per second over orders of 50 per second, at the
// same concurrency. ok is false when no 50-eSIM order succeeded.
func (o *orderResults) fiftyCost() (one closedRun, cost float64, ok bool) {
	fifty := o.createFifty.best()
	for _, c := range o.createOne.closedRuns {
		if c.workers == fifty.workers {
			one = c
		}
	}
	if fifty.result.RPS() <= 0 || one.workers == 0 {
		return one, 0, false
	}
	return one, one.result.RPS() / fifty.result.RPS(), true
}

// section is the report's Orders section: the rows, each ratio and the
// goals.
func (o *orderResults) section(p func(string, ...any), cfg config) {
	p("## Orders\n\n")
	p("| row | max orders, transactions or requests/s (best closed loop) | workers | p50 | p99 | errors |\n")
	p("|---|---:|---:|---:|---:|---:|\n")
	for _, m := range o.rows() {
		best := m.best()
		p("| %s | %.0f | %s | %s | %s | %d |\n", m.name, best.result.RPS(), best.workersText(), ms(best.result.P50), ms(best.result.P99), m.closedErrors())
	}
	p("\nClosed loops, per second by concurrency:\n\n| row |")
	for _, w := range cfg.workers {
		p(" %d workers |", w)
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(cfg.workers)))
	for _, m := range o.rows() {
		p("| %s |", m.name)
		for _, w := range cfg.workers {
			cell := "-"
			for _, c := range m.closedRuns {
				if c.workers == w {
					cell = fmt.Sprintf("%.0f", c.result.RPS())
				}
			}
			p(" %s |", cell)
		}
		p("\n")
	}

	orderRatio := rpsRatio(o.createOne, o.pgbench)
	readRatio := rpsRatio(o.readGateway, o.readBare)
	p("\nOrders / pgbench: **%.2f** (%.0f orders/s / %.0f transactions/s)\n\n", orderRatio, o.createOne.best().result.RPS(), o.pgbench.best().result.RPS())
	p("Reads, gateway / bare: **%.2f** (%.0f / %.0f req/s)\n\n", readRatio, o.readGateway.best().result.RPS(), o.readBare.best().result.RPS())
	one, cost, ok := o.fiftyCost()
	fifty := o.createFifty.best()
	costText := "-"
	if ok {
		costText = fmt.Sprintf("%.2f", cost)
		p50 := "-"
		if one.result.P50 > 0 {
			p50 = fmt.Sprintf("%.2f", float64(fifty.result.P50)/float64(one.result.P50))
		}
		p("A 50-eSIM order costs **%.2f** times a 1-eSIM one: %.0f against %.0f orders/s at %d workers (%.0f against %.0f eSIMs/s); its p50 is %s times (%s against %s).\n\n",
			cost, fifty.result.RPS(), one.result.RPS(), fifty.workers, 50*fifty.result.RPS(), one.result.RPS(), p50, ms(fifty.result.P50), ms(one.result.P50))
	} else {
		p("No 50-eSIM order succeeded (e.g. %s), so its cost is not known.\n\n", fifty.result.FirstErr)
	}

	p("### Targets (orders)\n\n")
	p("| target | measured | goal | status |\n|---|---:|---:|---|\n")
	p("| gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second | %.2f | >= %.2f | %s |\n", orderRatio, targetOrderRatio, metText(orderRatio >= targetOrderRatio))
	p("| gateway GET /v1/orders/{id} / bare net/http, requests per second | %.2f | >= %.2f | %s |\n", readRatio, targetReadRatio, metText(readRatio >= targetReadRatio))
	p("| cost of a 50-eSIM order / a 1-eSIM order (orders/s of 1 eSIM / orders/s of 50) | %s | <= %.2f | %s |\n", costText, targetFiftyCost, metText(ok && cost <= targetFiftyCost))
	var errs []string
	for _, m := range o.rows() {
		if n, first := m.errors(); n > 0 {
			errs = append(errs, fmt.Sprintf("%s %d (e.g. %s)", m.name, n, first))
		}
	}
	if len(errs) > 0 {
		p("\nErrors, which count against each row's rate: %s.\n", strings.Join(errs, "; "))
	}
	p("\n")
}
