package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importResult is what `plans import --json` prints.
type importResult struct {
	Plans     int `json:"plans"`
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
}

// writeFile writes content to a file of its own and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newPlanJSON is a plan the seed catalogue does not hold, as `plans get
// --json` would print it.
const newPlanJSON = `{
  "id": "0190d3f0-0000-7000-8000-0000000000a1",
  "name": "Japan 50 GB, 30 days",
  "type": "fixed",
  "coverage": {"scope": "country", "countries": ["JP"], "region": null},
  "data": {"unlimited": false, "total_bytes": 53687091200},
  "validity_days": 30,
  "prices": [
    {"amount": 69.00, "amount_minor": 6900, "currency": "USD", "per": "esim"},
    {"amount_minor": 6400, "currency": "EUR"},
    {"amount": 55, "amount_minor": 5500, "currency": "GBP"}
  ]
}`

// What `plans get --json` and `plans list --json` print imports back as it
// is, changes nothing the second time, and an edit of it updates the plan.
// A file of new plans creates them, each counted.
func TestPlansImportRoundTrips(t *testing.T) {
	env := map[string]string{"ESIM_CATALOGUE_URL": startCatalogue(t)}

	var listed []plan
	esimctl(t, env, "plans", "list", "--country", "FR", "--limit", "3", "--json").ok(t).data(t, &listed)
	page := esimctl(t, env, "plans", "list", "--country", "FR", "--limit", "3", "--json").ok(t).stdout
	var res importResult
	esimctl(t, env, "plans", "import", writeFile(t, "page.json", page), "--json").ok(t).data(t, &res)
	if res != (importResult{Plans: 3, Unchanged: 3}) {
		t.Errorf("a printed page imported back: %+v, want 3 unchanged", res)
	}

	one := esimctl(t, env, "plans", "get", listed[0].ID, "--json").ok(t).stdout
	edited := strings.Replace(one, listed[0].Name, "France, renamed", 1)
	out := esimctl(t, env, "plans", "import", writeFile(t, "plan.json", edited)).ok(t).stdout
	if !strings.Contains(out, "imported 1 plan from ") || !strings.Contains(out, "0 created, 1 updated, 0 unchanged") {
		t.Errorf("import of an edited plan printed %q", out)
	}
	var got plan
	esimctl(t, env, "plans", "get", listed[0].ID, "--json").ok(t).data(t, &got)
	if got.Name != "France, renamed" || got.Status != "active" {
		t.Errorf("after import: %+v", got)
	}

	file := writeFile(t, "new.json", "["+newPlanJSON+"]")
	esimctl(t, env, "plans", "import", file, "--json").ok(t).data(t, &res)
	if res != (importResult{Plans: 1, Created: 1}) {
		t.Errorf("a new plan: %+v, want 1 created", res)
	}
	esimctl(t, env, "plans", "get", "0190d3f0-0000-7000-8000-0000000000a1", "--json").ok(t).data(t, &got)
	if got.Name != "Japan 50 GB, 30 days" || len(got.Prices) != 3 || got.Status != "active" {
		t.Errorf("imported plan: %+v", got)
	}
	esimctl(t, env, "plans", "import", file, "--json").ok(t).data(t, &res)
	if res != (importResult{Plans: 1, Unchanged: 1}) {
		t.Errorf("the same file again: %+v, want 1 unchanged", res)
	}
}

// A file that is wrong is a usage error (exit 2) naming the file and the
// place in it, and nothing of it is stored: not even its good plans.
func TestPlansImportRefusesABadFileWhole(t *testing.T) {
	env := map[string]string{"ESIM_CATALOGUE_URL": startCatalogue(t)}
	const newID = "0190d3f0-0000-7000-8000-0000000000a1"
	other := strings.Replace(newPlanJSON, "0000000000a1", "0000000000a2", 1)
	for name, tc := range map[string]struct {
		content string
		want    []string
	}{
		"not JSON":              {"{", []string{"not JSON"}},
		"no plans":              {`{"data": []}`, []string{"no plans in it"}},
		"a number":              {`42`, []string{"want a plan, an array of plans"}},
		"two values":            {newPlanJSON + newPlanJSON, []string{"more than one JSON value"}},
		"unknown field":         {"[" + strings.Replace(newPlanJSON, `"name"`, `"nmae"`, 1) + "]", []string{`plans[0]: unknown field "nmae"`}},
		"unknown envelope":      {`{"data": [` + newPlanJSON + `], "extra": 1}`, []string{`unknown field "extra"`}},
		"bad type":              {"[" + other + "," + strings.Replace(newPlanJSON, `"fixed"`, `"bundle"`, 1) + "]", []string{`plans[1].type "bundle": want fixed or per_day`}},
		"bad scope":             {strings.Replace(newPlanJSON, `"country", "countries"`, `"nation", "countries"`, 1), []string{`plans[0].coverage.scope "nation"`}},
		"bad status":            {strings.Replace(newPlanJSON, `"validity_days": 30,`, `"validity_days": 30, "status": "gone",`, 1), []string{`plans[0].status "gone"`}},
		"no amount_minor":       {strings.Replace(newPlanJSON, `"amount_minor": 6400, `, ``, 1), []string{"plans[0].prices[1].amount_minor: required"}},
		"amounts disagree":      {strings.Replace(newPlanJSON, `"amount": 69.00`, `"amount": 69.10`, 1), []string{"plans[0].prices[0].amount 69.10 says 6910 minor units, amount_minor 6900"}},
		"three decimals":        {strings.Replace(newPlanJSON, `"amount": 69.00`, `"amount": 69.001`, 1), []string{"plans[0].prices[0].amount 69.001: want a plain decimal amount with at most two decimals, such as 12.50"}},
		"an exponent":           {strings.Replace(newPlanJSON, `"amount": 69.00`, `"amount": 6.9e1`, 1), []string{"plans[0].prices[0].amount 6.9e1: want a plain decimal amount"}},
		"trailing bracket":      {"[" + newPlanJSON + "]]", []string{"not JSON: more than one JSON value"}},
		"trailing brace":        {newPlanJSON + "}", []string{"not JSON: more than one JSON value"}},
		"a field given twice":   {"[" + other + "," + strings.Replace(newPlanJSON, `"validity_days": 30,`, `"validity_days": 30, "validity_days": 7,`, 1) + "]", []string{"[1].validity_days: given twice"}},
		"a price given twice":   {`{"data": [` + strings.Replace(newPlanJSON, `"currency": "EUR"}`, `"currency": "EUR", "currency": "GBP"}`, 1) + `]}`, []string{"data[0].prices[1].currency: given twice"}},
		"a field in two cases":  {strings.Replace(newPlanJSON, `"name"`, `"name": "Japan", "Name"`, 1), []string{`Name: given twice, also as "name"`}},
		"a name not UTF-8":      {"[" + strings.Replace(newPlanJSON, `"Japan 50 GB, 30 days"`, "\"Japan \xff\"", 1) + "]", []string{"[0].name: not UTF-8 text"}},
		"a lone surrogate":      {strings.Replace(newPlanJSON, `"JP"`, `"J\udc00"`, 1), []string{"coverage.countries[0]: not UTF-8 text"}},
		"no id":                 {strings.Replace(newPlanJSON, `"id": "0190d3f0-0000-7000-8000-0000000000a1",`, ``, 1), []string{"plans[0].id"}},
		"too many plans":        {"[" + strings.Repeat(newPlanJSON+",", 1000) + newPlanJSON + "]", []string{"1001 plans; the catalogue takes at most 1000 a call: split it"}},
		"too large":             {"[" + newPlanJSON + "]" + strings.Repeat(" ", 8<<20), []string{"larger than 8 MiB"}},
		"refused by catalogue":  {"[" + other + "," + strings.Replace(newPlanJSON, `{"amount": 55, "amount_minor": 5500, "currency": "GBP"}`, `{"amount_minor": 5500, "currency": "XXX"}`, 1) + "]", []string{"import plans from ", "plans[1].prices"}},
		"a country plan's move": {"[" + other + "," + strings.Replace(newPlanJSON, `"0190d3f0-0000-7000-8000-0000000000a1"`, `"ffd0cbd7-416e-5eff-a994-7e98fd4aa80f"`, 1) + "]", []string{"plans[1]", "new id"}},
	} {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, "plans.json", tc.content)
			esimctl(t, env, "plans", "import", file).wantError(t, 2, append(tc.want, "import plans from "+file)...)
		})
	}
	esimctl(t, env, "plans", "import", filepath.Join(t.TempDir(), "missing.json")).wantError(t, 2, "cannot read it: no such file or directory")
	for _, id := range []string{newID, strings.Replace(newID, "a1", "a2", 1)} {
		esimctl(t, env, "plans", "get", id).wantError(t, 1, "not found")
	}
	var laos plan
	esimctl(t, env, "plans", "get", "ffd0cbd7-416e-5eff-a994-7e98fd4aa80f", "--json").ok(t).data(t, &laos)
	if laos.Coverage.Countries[0] != "LA" {
		t.Errorf("a refused import moved the Laos plan: %+v", laos)
	}
}

// A file exported while a plan was on sale does not put it back on sale
// once it is retired: "active" keeps a stored plan's status, unless
// --reactivate says otherwise. "retired" retires.
func TestPlansImportDoesNotReactivateUnlessAsked(t *testing.T) {
	env := map[string]string{"ESIM_CATALOGUE_URL": startCatalogue(t)}
	const laos = "ffd0cbd7-416e-5eff-a994-7e98fd4aa80f"
	exported := writeFile(t, "laos.json", esimctl(t, env, "plans", "get", laos, "--json").ok(t).stdout)
	esimctl(t, env, "plans", "retire", laos).ok(t)

	var res importResult
	esimctl(t, env, "plans", "import", exported, "--json").ok(t).data(t, &res)
	var got plan
	esimctl(t, env, "plans", "get", laos, "--json").ok(t).data(t, &got)
	if res != (importResult{Plans: 1, Unchanged: 1}) || got.Status != "retired" {
		t.Fatalf("import of an export made before the plan was retired: %+v, status %q; want it unchanged and retired", res, got.Status)
	}

	esimctl(t, env, "plans", "import", exported, "--reactivate", "--json").ok(t).data(t, &res)
	esimctl(t, env, "plans", "get", laos, "--json").ok(t).data(t, &got)
	if res != (importResult{Plans: 1, Updated: 1}) || got.Status != "active" {
		t.Fatalf("with --reactivate: %+v, status %q; want it updated and active", res, got.Status)
	}

	retired := strings.Replace(esimctl(t, env, "plans", "get", laos, "--json").ok(t).stdout, `"status": "active"`, `"status": "retired"`, 1)
	esimctl(t, env, "plans", "import", writeFile(t, "retire.json", retired)).ok(t)
	esimctl(t, env, "plans", "get", laos, "--json").ok(t).data(t, &got)
	if got.Status != "retired" {
		t.Fatalf(`"status": "retired" left the plan %q`, got.Status)
	}
}
