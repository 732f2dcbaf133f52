package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/catalogue"
)

// FuzzPlansImport reads arbitrary bytes as a `plans import` file. It is
// refused with a reason, or read as 1 to catalogue.MaxUpsertBatch plans;
// then the file was UTF-8 that named no field twice, in any case (which
// encoding/json would read as one field, keeping the last), and the plans,
// printed as `plans get --json` prints them and imported again, are the
// same plans: what an import reads, it reads as written.
func FuzzPlansImport(f *testing.F) {
	f.Add([]byte(newPlanJSON), false)
	f.Add([]byte(`{"data": [`+newPlanJSON+`], "pagination": {"page": 1}}`), true)
	f.Add([]byte(`{"data": `+newPlanJSON+`}`), false)
	f.Add([]byte(`[`+strings.Replace(newPlanJSON, `"fixed"`, `"per_day"`, 1)+`]`), false)
	f.Add([]byte(strings.Replace(newPlanJSON, `"name"`, `"name": "x", "Name"`, 1)), false)
	f.Add([]byte(strings.Replace(newPlanJSON, `"validity_days": 30,`, `"validity_days": 30, "validity_days": 7,`, 1)), false)
	f.Add([]byte(`{"id": "x", "status": "retired", "prices": [{"amount": 1.5, "amount_minor": 150}]}`), false)
	f.Add([]byte(`[]`), false)
	f.Add([]byte(strings.Replace(newPlanJSON, `"Japan 50 GB, 30 days"`, "\"Japan \xff\"", 1)), false)
	f.Add([]byte(strings.Replace(newPlanJSON, `"Japan 50 GB, 30 days"`, `"Japan \ud800"`, 1)), false)
	f.Fuzz(func(t *testing.T, data []byte, reactivate bool) {
		plans, err := parsePlans(data, reactivate)
		if err != nil {
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) {
				t.Fatalf("refused with the reason %q", msg)
			}
			return
		}
		if len(plans) == 0 || len(plans) > catalogue.MaxUpsertBatch {
			t.Fatalf("read %d plans", len(plans))
		}
		if !utf8.Valid(data) {
			t.Fatalf("read %q, which is not UTF-8", data)
		}
		if name, ok := foldedTwice(data); ok {
			t.Fatalf("read %q, which names %q twice (in some case)", data, name)
		}
		printed := printPlans(t, plans)
		if bytes.Contains(printed, []byte("\uFFFD")) && !bytes.Contains(data, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`)) {
			t.Fatalf("read %q with text replaced by U+FFFD:\n%s", data, printed)
		}
		again, err := parsePlans(printed, reactivate)
		if err != nil {
			t.Fatalf("read %q as plans that, printed as\n%s\n, are refused: %v", data, printed, err)
		}
		if reprinted := printPlans(t, again); !bytes.Equal(reprinted, printed) {
			t.Fatalf("read %q as plans printed\n%s\nwhich import as plans printed\n%s", data, printed, reprinted)
		}
		for i := range plans {
			// What a print leaves out (a total on an unlimited plan, a
			// validity on a per-day one) is the catalogue's to refuse.
			want := proto.Clone(plans[i]).(*cataloguev1.Plan)
			if want.Unlimited {
				want.TotalBytes = 0
			}
			if want.Type == cataloguev1.PlanType_PLAN_TYPE_PER_DAY {
				want.ValidityDays = 0
			}
			if !proto.Equal(want, again[i]) {
				t.Fatalf("plans[%d] of %q reads as %v, and printed and imported again as %v", i, data, want, again[i])
			}
		}
	})
}

// printPlans is plans as `plans list --json` prints them.
func printPlans(t *testing.T, plans []*cataloguev1.Plan) []byte {
	t.Helper()
	views := make([]planView, len(plans))
	for i, p := range plans {
		views[i] = viewPlan(p)
		if p.Status == cataloguev1.PlanStatus_PLAN_STATUS_UNSPECIFIED {
			views[i].Status = "" // the file left it out
		}
	}
	out, err := json.Marshal(map[string]any{"data": views})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// foldedTwice finds, with encoding/json's tokenizer, an object that names
// a member twice, equal or equal but for case (which encoding/json matches
// to one field).
func foldedTwice(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type object struct {
		names     []string
		expecting bool
	}
	var stack []*object // nil entries are arrays
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.expecting {
			for _, n := range top.names {
				if strings.EqualFold(n, name) {
					return name, true
				}
			}
			top.names, top.expecting = append(top.names, name), false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{expecting: true})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1] != nil {
			stack[len(stack)-1].expecting = true
		}
	}
}

func TestFoldedTwiceSeesCaseVariants(t *testing.T) {
	for data, want := range map[string]bool{
		`{"a": {"name": 1, "Name": 2}}`:      true,
		`{"a": 1, "b": {"a": 2}}`:            false,
		`[{"k": 1}, {"\u212a": 1}]`:          false,
		`{"k": 1, "\u212a": 1}`:              true, // the Kelvin sign folds to k
		`{"data": [{"id": 1}, {"id": 2}]}`:   false,
		`{"prices": [{"per": 1, "PER": 2}]}`: true,
	} {
		if _, got := foldedTwice([]byte(data)); got != want {
			t.Errorf("foldedTwice(%s) = %v, want %v", data, got, want)
		}
	}
}
