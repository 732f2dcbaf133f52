package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/money"
)

// envelope is the shape of every --json output, the same as the public API:
// one object, the payload under "data", lists with their pagination.
type envelope struct {
	Data       any         `json:"data"`
	Pagination *pagination `json:"pagination,omitempty"`
}

type pagination struct {
	Page    int32 `json:"page"`
	Limit   int32 `json:"limit"`
	Total   int32 `json:"total"`
	HasMore bool  `json:"has_more"`
}

func newPagination(page, limit, total int32) *pagination {
	return &pagination{Page: page, Limit: limit, Total: total, HasMore: int64(page)*int64(limit) < int64(total)}
}

func (c *cli) printJSON(data any, p *pagination) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(envelope{Data: data, Pagination: p})
}

// table aligns columns, under a header when one is given; Flush must be
// called.
func table(w io.Writer, header ...any) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		row(tw, header...)
	}
	return tw
}

func row(w io.Writer, cells ...any) {
	for i, cell := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, cell)
	}
	fmt.Fprintln(w)
}

// priceText renders "12.50 USD".
func priceText(minor int64, currency string) string {
	return money.Decimal(minor) + " " + currency
}

// timestamp renders a protobuf timestamp as RFC 3339 in UTC, or nil for an
// unset one so JSON shows null.
func timestamp(ts *timestamppb.Timestamp) *string {
	if ts == nil {
		return nil
	}
	s := ts.AsTime().UTC().Format(time.RFC3339)
	return &s
}

// textTime is a timestamp as the text output shows it.
func textTime(ts *timestamppb.Timestamp) string {
	if s := timestamp(ts); s != nil {
		return *s
	}
	return "-"
}

// dataSize renders a data allowance the way plans are sold and named by the
// catalogue: 1 GB is 2^30 bytes, as carriers count it.
func dataSize(n int64) string {
	const mb, gb = 1 << 20, 1 << 30
	switch {
	case n >= gb && n%gb == 0:
		return strconv.FormatInt(n/gb, 10) + " GB"
	case n >= gb:
		// One decimal, truncated, in integer arithmetic.
		return fmt.Sprintf("%d.%d GB", n/gb, n%gb*10/gb)
	case n >= mb:
		return strconv.FormatInt(n/mb, 10) + " MB"
	default:
		return strconv.FormatInt(n, 10) + " B"
	}
}

// orNull is s for JSON, or null when empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
