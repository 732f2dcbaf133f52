package main

import (
	"fmt"
	"strings"
)

// The order rows' goals (issues 20 and 33): orders at half of what
// Postgres alone commits of their writes at every concurrency, for one
// partner as for many; reads at a quarter of a bare handler, still at
// nine tenths of their best with the most workers; an order of 50 eSIMs at
// most five times the cost of one of one.
const (
	targetOrderRatio = 0.5
	targetReadRatio  = 0.25
	targetReadsHeld  = 0.9
	targetFiftyCost  = 5.0
)

// ordersSection names the order rows' section, in its heading and in the
// Goals table.
const ordersSection = "Orders"

// rows are the order rows, in the order they are measured.
func (o *orderResults) rows() []measurement {
	return []measurement{o.createOne, o.createFifty, o.pgbench, o.createMany, o.pgbenchMany, o.readGateway, o.readBare}
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
// errors.
func (o *orderResults) section(p func(string, ...any), cfg config) {
	p("## %s\n\n", ordersSection)
	methodLine(p, "orders", "`POST /v1/orders` of 1 eSIM of plan %s through the gateway for one partner, then for %d partners at once, each against pgbench running an order's writes on one balance, then on %d (up to %d clients); of 50 eSIMs; `GET /v1/orders/{id}` (%d-byte JSON answer) through the gateway against a bare handler; closed loops of %s workers for %s each, each phase once the last one's events are delivered",
		o.planID, pgbenchAccounts, pgbenchAccounts, o.pgbenchMaxClients, o.orderBytes, joinInts(cfg.workers), cfg.duration)
	o.bestTable(p)
	o.concurrencyTable(p, cfg.workers)
	p("Orders / pgbench: **%.2f** (%.0f orders/s / %.0f transactions/s); by concurrency %s\n\n", rpsRatio(o.createOne, o.pgbench), o.createOne.best().result.RPS(), o.pgbench.best().result.RPS(), ratiosText(o.createOne, o.pgbench, cfg.workers))
	p("%d partners' orders / pgbench on %d balances: **%.2f** (%.0f orders/s / %.0f transactions/s); by concurrency %s\n\n", pgbenchAccounts, pgbenchAccounts, rpsRatio(o.createMany, o.pgbenchMany), o.createMany.best().result.RPS(), o.pgbenchMany.best().result.RPS(), ratiosText(o.createMany, o.pgbenchMany, cfg.workers))
	p("Reads, gateway / bare: **%.2f** (%.0f / %.0f req/s)\n\n", rpsRatio(o.readGateway, o.readBare), o.readGateway.best().result.RPS(), o.readBare.best().result.RPS())
	o.fiftyLine(p)
	var errs []string
	for _, m := range o.rows() {
		if n, first := m.errors(); n > 0 {
			errs = append(errs, fmt.Sprintf("%s %d (e.g. %s)", m.name, n, first))
		}
	}
	if len(errs) > 0 {
		p("Errors, which count against each row's rate: %s.\n\n", strings.Join(errs, "; "))
	}
}

// bestTable is each row at its best concurrency.
func (o *orderResults) bestTable(p func(string, ...any)) {
	p("| row | max orders, transactions or requests/s (best closed loop) | workers | p50 | p99 | errors |\n")
	p("|---|---:|---:|---:|---:|---:|\n")
	for _, m := range o.rows() {
		best := m.best()
		p("| %s | %.0f | %s | %s | %s | %d |\n", m.name, best.result.RPS(), best.workersText(), ms(best.result.P50), ms(best.result.P99), m.closedErrors())
	}
	p("\n")
}

// concurrencyTable is each row at every concurrency, "-" where it did
// not run (the 50-eSIM orders run at one).
func (o *orderResults) concurrencyTable(p func(string, ...any), workers []int) {
	p("Closed loops, per second by concurrency:\n\n| row |")
	for _, w := range workers {
		p(" %d workers |", w)
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(workers)))
	for _, m := range o.rows() {
		p("| %s |", m.name)
		for _, w := range workers {
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
	p("\n")
}

// fiftyLine says what a 50-eSIM order costs against a 1-eSIM one.
func (o *orderResults) fiftyLine(p func(string, ...any)) {
	one, cost, ok := o.fiftyCost()
	fifty := o.createFifty.best()
	if !ok {
		p("No 50-eSIM order succeeded (e.g. %s), so its cost is not known.\n\n", fifty.result.FirstErr)
		return
	}
	p50 := "-"
	if one.result.P50 > 0 {
		p50 = fmt.Sprintf("%.2f", float64(fifty.result.P50)/float64(one.result.P50))
	}
	p("A 50-eSIM order costs **%.2f** times a 1-eSIM one: %.0f against %.0f orders/s at %d workers (%.0f against %.0f eSIMs/s); its p50 is %s times (%s against %s).\n\n",
		cost, fifty.result.RPS(), one.result.RPS(), fifty.workers, 50*fifty.result.RPS(), one.result.RPS(), p50, ms(fifty.result.P50), ms(one.result.P50))
}

// goals are the order rows' goals: errors count against each row's rate,
// so no goal asks for none.
func (o *orderResults) goals() []goal {
	readRatio := rpsRatio(o.readGateway, o.readBare)
	_, cost, ok := o.fiftyCost()
	costText := "-"
	if ok {
		costText = fmt.Sprintf("%.2f", cost)
	}
	var gs []goal
	for _, pair := range []struct {
		orders, control measurement
		who             string
	}{{o.createOne, o.pgbench, "one partner"}, {o.createMany, o.pgbenchMany, fmt.Sprintf("%d partners", pgbenchAccounts)}} {
		for _, c := range pair.orders.closedRuns {
			ratio, known := ratioAt(pair.orders, pair.control, c.workers)
			gs = append(gs, goal{section: ordersSection,
				name:     fmt.Sprintf("gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second, %s, %d workers", pair.who, c.workers),
				measured: ratioText(ratio, known), want: fmt.Sprintf(">= %.2f", targetOrderRatio), met: known && ratio >= targetOrderRatio})
		}
	}
	gs = append(gs,
		goal{section: ordersSection, name: "gateway GET /v1/orders/{id} / bare net/http, requests per second",
			measured: fmt.Sprintf("%.2f", readRatio), want: fmt.Sprintf(">= %.2f", targetReadRatio), met: readRatio >= targetReadRatio},
		readsHeld(ordersSection, o.readGateway),
		goal{section: ordersSection, name: "cost of a 50-eSIM order / a 1-eSIM order (orders/s of 1 eSIM / orders/s of 50)",
			measured: costText, want: fmt.Sprintf("<= %.2f", targetFiftyCost), met: ok && cost <= targetFiftyCost})
	return gs
}

// ratioAt is a's rate over b's at the same number of workers; known is
// false when either did not run at it or b completed nothing.
func ratioAt(a, b measurement, workers int) (ratio float64, known bool) {
	ra, ran := 0.0, false
	for _, c := range a.closedRuns {
		if c.workers == workers {
			ra, ran = c.result.RPS(), true
		}
	}
	var rb float64
	for _, c := range b.closedRuns {
		if c.workers == workers {
			rb = c.result.RPS()
		}
	}
	if !ran || rb <= 0 {
		return 0, false
	}
	return ra / rb, true
}

func ratioText(ratio float64, known bool) string {
	if !known {
		return "-"
	}
	return fmt.Sprintf("%.2f", ratio)
}

// ratiosText is a's rate over b's at each of workers: "16: 0.40, 64: 0.31".
func ratiosText(a, b measurement, workers []int) string {
	var parts []string
	for _, w := range workers {
		r, known := ratioAt(a, b, w)
		parts = append(parts, fmt.Sprintf("%d: %s", w, ratioText(r, known)))
	}
	return strings.Join(parts, ", ")
}

// readsHeld is the goal that a read row keeps, with the most workers, at
// least targetReadsHeld of its best rate: more partners at once must not
// make reads slower in all.
func readsHeld(section string, m measurement) goal {
	best := m.best().result.RPS()
	var most closedRun
	for _, c := range m.closedRuns {
		if c.workers > most.workers {
			most = c
		}
	}
	held, known := 0.0, best > 0
	if known {
		held = most.result.RPS() / best
	}
	return goal{section: section, name: fmt.Sprintf("%s at %d workers / at its best", m.name, most.workers),
		measured: ratioText(held, known), want: fmt.Sprintf(">= %.2f", targetReadsHeld), met: known && held >= targetReadsHeld}
}
