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

// ordersSection names the order rows' section, in its heading and in the
// Goals table.
const ordersSection = "Orders"

// rows are the order rows, in the order they are measured.
func (o *orderResults) rows() []measurement {
	return []measurement{o.createOne, o.createFifty, o.pgbench, o.readGateway, o.readBare}
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
	methodLine(p, "orders", "`POST /v1/orders` of 1 eSIM of plan %s through the gateway against pgbench running an order's writes (up to %d clients), then of 50 eSIMs; `GET /v1/orders/{id}` (%d-byte JSON answer) through the gateway against a bare handler; closed loops of %s workers for %s each",
		o.planID, o.pgbenchMaxClients, o.orderBytes, joinInts(cfg.workers), cfg.duration)
	o.bestTable(p)
	o.concurrencyTable(p, cfg.workers)
	p("Orders / pgbench: **%.2f** (%.0f orders/s / %.0f transactions/s)\n\n", rpsRatio(o.createOne, o.pgbench), o.createOne.best().result.RPS(), o.pgbench.best().result.RPS())
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
	orderRatio := rpsRatio(o.createOne, o.pgbench)
	readRatio := rpsRatio(o.readGateway, o.readBare)
	_, cost, ok := o.fiftyCost()
	costText := "-"
	if ok {
		costText = fmt.Sprintf("%.2f", cost)
	}
	return []goal{
		{section: ordersSection, name: "gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second",
			measured: fmt.Sprintf("%.2f", orderRatio), want: fmt.Sprintf(">= %.2f", targetOrderRatio), met: orderRatio >= targetOrderRatio},
		{section: ordersSection, name: "gateway GET /v1/orders/{id} / bare net/http, requests per second",
			measured: fmt.Sprintf("%.2f", readRatio), want: fmt.Sprintf(">= %.2f", targetReadRatio), met: readRatio >= targetReadRatio},
		{section: ordersSection, name: "cost of a 50-eSIM order / a 1-eSIM order (orders/s of 1 eSIM / orders/s of 50)",
			measured: costText, want: fmt.Sprintf("<= %.2f", targetFiftyCost), met: ok && cost <= targetFiftyCost},
	}
}
