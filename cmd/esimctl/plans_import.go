package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/esimplatform/esim/libs/money"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
)

// maxImportBytes bounds the file read: the catalogue takes at most
// limits.MaxPlansPerUpsert plans a call, and a plan printed by `plans get
// --json` covering every country is about 4.5 KB, so 1,000 of those fit.
const maxImportBytes = 8 << 20

// importedPlan is a plan as `plans get --json` and `plans list --json`
// print it (planView), read back, with its prices read as importedPrice,
// which tells a missing amount from a zero one. What the catalogue keeps
// itself (created_at, updated_at) and a price's "per" are read and
// ignored, so a printed plan imports as it is; any other field is refused,
// so that a misspelt one is not silently dropped.
type importedPlan struct {
	planView
	// Shadows planView.Prices: encoding/json takes the shallower field.
	Prices []importedPrice `json:"prices"`
}

type importedPrice struct {
	Amount      *json.Number `json:"amount"`
	AmountMinor *int64       `json:"amount_minor"`
	Currency    string       `json:"currency"`
	Per         string       `json:"per"`
}

// importView is what --json prints after an import.
type importView struct {
	Plans     int32 `json:"plans"`
	Created   int32 `json:"created"`
	Updated   int32 `json:"updated"`
	Unchanged int32 `json:"unchanged"`
}

func (c *cli) plansImportCommand() *cobra.Command {
	var reactivate bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Create or update plans from a JSON file, all of them or none",
		Long: `Create or update the plans in FILE, in one transaction: every plan is
stored, or none is.

FILE holds plans as "esimctl plans get --json" and "plans list --json" print
them: their output as it is, or the plans alone in a JSON array. A plan is
matched by its id. A new id creates a plan; a known one replaces its name,
data, validity, prices and, for regional and global plans, the countries it
covers and a region's name. Its type, its scope and a country plan's country
cannot change: retire it and import a new id. Prices are read from
amount_minor (cents or pence); an amount beside it must say the same. Every
plan needs a price in USD, EUR and GBP. At most 1000 plans a file. Unknown
and repeated fields are refused.

"status": "retired" retires a plan. "active", or none, makes a new plan
active and leaves a stored plan's status as it is: a file exported before a
plan was retired does not put it back on sale. --reactivate lets "active"
do that.

Importing the same file again changes nothing.`,
		Example: "  esimctl plans get <plan id> --json > plan.json   # edit it, then\n  esimctl plans import plan.json",
		Args:    exactArgs("FILE"),
	}
	cmd.Flags().BoolVar(&reactivate, "reactivate", false, `let "status": "active" put a retired plan back on sale`)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, args []string) error {
		plans, err := readPlans(args[0], reactivate)
		if err != nil {
			return err
		}
		resp, err := c.catalogue().UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: plans})
		if err != nil {
			return c.callFailed("import plans from "+args[0], "catalogue", err)
		}
		if c.json {
			return c.printJSON(importView{Plans: resp.GetUpserted(), Created: resp.GetCreated(), Updated: resp.GetUpdated(), Unchanged: resp.GetUnchanged()}, nil)
		}
		noun := "plans"
		if resp.GetUpserted() == 1 {
			noun = "plan"
		}
		fmt.Fprintf(c.stdout, "imported %d %s from %s: %d created, %d updated, %d unchanged\n",
			resp.GetUpserted(), noun, args[0], resp.GetCreated(), resp.GetUpdated(), resp.GetUnchanged())
		return nil
	})
	return cmd
}

// readPlans reads and checks an import file. Whatever is wrong with it is
// a usage error naming the file and, for a plan, its place in the file as
// the catalogue names it ("plans[3].prices[0]").
func readPlans(path string, reactivate bool) ([]*cataloguev1.Plan, error) {
	bad := func(format string, args ...any) error {
		return usagef("import plans from %s: %s", path, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(path)
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return nil, bad("cannot read it: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
	switch {
	case err != nil:
		return nil, bad("cannot read it: %v", err)
	case len(data) > maxImportBytes:
		return nil, bad("larger than %d MiB; the catalogue takes at most %d plans a call: split it", maxImportBytes>>20, limits.MaxPlansPerUpsert)
	}
	plans, err := parsePlans(data, reactivate)
	if err != nil {
		return nil, bad("%v", err)
	}
	return plans, nil
}

// parsePlans reads the plans of an import file's content (readPlans; the
// fuzz target reads through here too).
func parsePlans(data []byte, reactivate bool) ([]*cataloguev1.Plan, error) {
	items, err := planItems(data)
	if err != nil {
		return nil, err
	}
	switch {
	case len(items) == 0:
		return nil, errors.New("no plans in it")
	case len(items) > limits.MaxPlansPerUpsert:
		return nil, fmt.Errorf("%d plans; the catalogue takes at most %d a call: split it", len(items), limits.MaxPlansPerUpsert)
	}
	plans := make([]*cataloguev1.Plan, len(items))
	for i, raw := range items {
		var p importedPlan
		if err := decodeStrict(raw, &p); err != nil {
			return nil, fmt.Errorf("plans[%d]: %v", i, err)
		}
		if plans[i], err = p.proto(); err != nil {
			return nil, fmt.Errorf("plans[%d].%v", i, err)
		}
		if plans[i].Status == cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE && !reactivate {
			// Unspecified: new plans are active, stored ones keep theirs.
			plans[i].Status = cataloguev1.PlanStatus_PLAN_STATUS_UNSPECIFIED
		}
	}
	return plans, nil
}

// planItems finds the plans in a file: the output of `plans list --json`
// ({"data": [...], "pagination": ...}) or `plans get --json`
// ({"data": {...}}), an array of plans, or one plan.
func planItems(data []byte) ([]json.RawMessage, error) {
	// encoding/json would keep the last of a repeated field without a
	// word; every plan is part of data, so one walk covers them all.
	if err := noRepeatedKeys(data); err != nil {
		return nil, err
	}
	if err := onlyUTF8(data); err != nil {
		return nil, err
	}
	var top json.RawMessage
	if err := decodeStrict(data, &top); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	top = bytes.TrimSpace(top)
	if len(top) > 0 && top[0] == '{' {
		var envelope map[string]json.RawMessage
		if err := json.Unmarshal(top, &envelope); err != nil {
			return nil, err
		}
		// A plan has a "data" field of its own (its data allowance): an
		// envelope's "data" holds plans, a list or one with an id.
		if !isEnvelope(envelope) {
			return []json.RawMessage{top}, nil
		}
		for k := range envelope {
			if k != "data" && k != "pagination" {
				return nil, fmt.Errorf("unknown field %q beside \"data\"", k)
			}
		}
		top = bytes.TrimSpace(envelope["data"])
		if len(top) > 0 && top[0] == '{' {
			return []json.RawMessage{top}, nil
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(top, &items); err != nil {
		return nil, errors.New("want a plan, an array of plans, or the output of `esimctl plans list --json` or `plans get --json`")
	}
	return items, nil
}

// isEnvelope tells `plans list|get --json` output from a plan, whose own
// "data" is its data allowance.
func isEnvelope(obj map[string]json.RawMessage) bool {
	inner, ok := obj["data"]
	if _, isPlan := obj["id"]; isPlan || !ok {
		return false
	}
	inner = bytes.TrimSpace(inner)
	if len(inner) > 0 && inner[0] == '[' {
		return true
	}
	var plan map[string]json.RawMessage
	if json.Unmarshal(inner, &plan) != nil {
		return false
	}
	_, hasID := plan["id"]
	return hasID
}

// decodeStrict decodes one JSON value, refusing unknown fields and
// anything after the value. Repeated fields are planItems's to refuse,
// once for the whole file.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

// noRepeatedKeys walks data's tokens and refuses an object that names a
// field twice, saying where in the file ("data[1].validity_days"). Names
// that differ only in case count as one: encoding/json matches a field
// whatever the case of its name, and would keep the last. Malformed JSON
// is left to the decoder to describe.
func noRepeatedKeys(data []byte) error {
	type frame struct {
		keys      map[string]string // by folded name, as first written; nil in an array
		key       string            // the field being read, in an object
		expectKey bool
		index     int // the element being read, in an array
	}
	var stack []*frame
	where := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.keys != nil {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if key, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].expectKey {
			top := stack[len(stack)-1]
			top.key, top.expectKey = key, false
			switch first, seen := top.keys[foldName(key)]; {
			case seen && first == key:
				return fmt.Errorf("%s: given twice", where())
			case seen:
				return fmt.Errorf("%s: given twice, also as %q (a name is matched whatever its case)", where(), first)
			}
			top.keys[foldName(key)] = key
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]string{}, expectKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: an object reads a key next, an array its next
		// element.
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.keys != nil {
				top.expectKey = true
			} else {
				top.index++
			}
		}
	}
}

// proto is the plan as the catalogue takes it. Errors start with the field
// at fault, for readPlans to put after the plan's place.
func (p importedPlan) proto() (*cataloguev1.Plan, error) {
	if strings.TrimSpace(p.Name) == "" {
		return nil, fmt.Errorf("name %q: blank: every plan needs a name", p.Name)
	}
	planType, ok := cataloguev1.PlanTypeByShortName(p.Type)
	if !ok {
		return nil, fmt.Errorf("type %q: want fixed or per_day", p.Type)
	}
	scope, ok := cataloguev1.CoverageScopeByShortName(p.Coverage.Scope)
	if !ok {
		return nil, fmt.Errorf("coverage.scope %q: want country, region or global", p.Coverage.Scope)
	}
	var status cataloguev1.PlanStatus
	if p.Status != "" {
		if status, ok = cataloguev1.PlanStatusByShortName(p.Status); !ok {
			return nil, fmt.Errorf("status %q: want active or retired, or leave it out", p.Status)
		}
	}
	out := &cataloguev1.Plan{
		Id: p.ID, Name: p.Name, Type: planType, Scope: scope, Status: status,
		Countries: p.Coverage.Countries, Unlimited: p.Data.Unlimited,
	}
	if p.Coverage.Region != nil {
		out.Region = *p.Coverage.Region
	}
	if p.Data.TotalBytes != nil {
		out.TotalBytes = *p.Data.TotalBytes
	}
	if p.ValidityDays != nil {
		out.ValidityDays = *p.ValidityDays
	}
	for i, price := range p.Prices {
		if price.AmountMinor == nil {
			return nil, fmt.Errorf("prices[%d].amount_minor: required, the price in cents or pence", i)
		}
		if price.Amount != nil {
			minor, err := money.ParseDecimal(string(*price.Amount))
			if err != nil {
				return nil, fmt.Errorf("prices[%d].amount %s: %v", i, *price.Amount, err)
			}
			if minor != *price.AmountMinor {
				return nil, fmt.Errorf("prices[%d].amount %s says %d minor units, amount_minor %d: leave one out or make them agree", i, *price.Amount, minor, *price.AmountMinor)
			}
		}
		out.Prices = append(out.Prices, &cataloguev1.Money{AmountMinor: *price.AmountMinor, Currency: price.Currency})
	}
	return out, nil
}

// foldName is name with each letter in one case, so that two names
// strings.EqualFold (as encoding/json matches them) fold alike: each rune
// becomes the least of its Unicode case-folding orbit (K, k and the Kelvin
// sign alike).
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// onlyUTF8 refuses text that is not UTF-8, raw or escaped (half of a
// surrogate pair), saying where ("data[0].name"): encoding/json would put
// U+FFFD in its place without a word, and the catalogue would keep that.
// jsontext, encoding/json/v2's tokenizer, finds it. Malformed JSON is
// left to the decoder to describe.
func onlyUTF8(data []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	for {
		_, err := dec.ReadToken()
		var serr *jsontext.SyntacticError
		switch {
		case err == nil:
			continue
		case !errors.As(err, &serr):
			return nil
		case serr.Err.Error() != "invalid UTF-8" && !strings.Contains(serr.Err.Error(), "surrogate"):
			return nil
		}
		var where strings.Builder
		level := 0
		for tok := range serr.JSONPointer.Tokens() {
			level++
			if kind, _ := dec.StackIndex(level); kind == '[' {
				fmt.Fprintf(&where, "[%s]", tok)
				continue
			}
			if where.Len() > 0 {
				where.WriteByte('.')
			}
			where.WriteString(tok)
		}
		if where.Len() == 0 {
			return errors.New("not UTF-8 text")
		}
		return fmt.Errorf("%s: not UTF-8 text", where.String())
	}
}
