package rollout

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// grandfathered is each service's newest migration written before the
// rule that migrations are expand-only: those are history, and some
// contracted the schema under the release before them (ordering's 00006
// drops the outbox). Every later one is linted. Ordering's 00007 is
// linted too: it contracts nothing its previous release needs, and says
// why where it looks as if it did.
var grandfathered = map[string]int64{
	"accounts":  3,
	"catalogue": 3,
	"wallet":    2,
	"ordering":  6,
	"webhook":   3,
}

// TestNewMigrationsAreExpandOnly fails on any migration after the
// grandfathered ones that drops, renames, retypes or requires what the
// previous release of its service still reads or leaves out, unless the
// statement says why with a `-- contract: <why>` comment: during a rolling
// upgrade that release serves from the schema the new one migrated
// (docs/conventions.md, "Migrations").
func TestNewMigrationsAreExpandOnly(t *testing.T) {
	root := repoRoot(t)
	dirs, err := filepath.Glob(filepath.Join(root, "services", "*", "postgres", "migrations"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no services/*/postgres/migrations (%v)", err)
	}
	linted := 0
	for _, dir := range dirs {
		service := filepath.Base(filepath.Dir(filepath.Dir(dir)))
		for _, f := range migrationFiles(t, service) {
			version, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
			if err != nil {
				t.Fatalf("%s: no version number before its first _", f)
			}
			if version <= grandfathered[service] {
				continue
			}
			sql, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			linted++
			for _, fd := range lintMigration(string(sql)) {
				t.Errorf("%s:%d: %s: %s\n    %s\n  Migrations are expand-only within a release: the previous release serves from this schema during a rolling upgrade. "+
					"Expand now and contract in a later release, once no running release needs it, or justify the statement with a `-- contract: <why>` comment (docs/conventions.md, \"Migrations\").",
					f, fd.line, fd.what, fd.why, fd.code)
			}
		}
	}
	t.Logf("linted %d migrations newer than the grandfathered ones", linted)
}

// TestLintFindsContractingStatements checks the lint itself, on
// statements and on a grandfathered migration that contracted the schema.
func TestLintFindsContractingStatements(t *testing.T) {
	cases := []struct {
		sql  string
		want []string // what each finding is, in order
	}{
		{"ALTER TABLE orders DROP COLUMN note;", []string{"DROP COLUMN"}},
		{"DROP TABLE outbox;", []string{"DROP TABLE"}},
		{"DROP VIEW IF EXISTS v;", []string{"DROP VIEW"}},
		{"ALTER TABLE orders RENAME COLUMN note TO remark;", []string{"RENAME"}},
		{"ALTER TABLE orders RENAME TO purchases;", []string{"RENAME"}},
		{"ALTER TABLE orders ALTER COLUMN total TYPE numeric;", []string{"ALTER COLUMN ... TYPE"}},
		{"ALTER TABLE orders ALTER total SET DATA TYPE numeric;", []string{"ALTER COLUMN ... TYPE"}},
		{"ALTER TABLE orders ALTER COLUMN note SET NOT NULL;", []string{"SET NOT NULL"}},
		{"ALTER TABLE orders ADD COLUMN note text NOT NULL;", []string{"ADD COLUMN ... NOT NULL without DEFAULT"}},
		{"ALTER TABLE orders ADD COLUMN a int, ADD COLUMN note text NOT NULL, ADD COLUMN b int DEFAULT 1;", []string{"ADD COLUMN ... NOT NULL without DEFAULT"}},
		// Expanding is fine.
		{"ALTER TABLE orders ADD COLUMN note text;", nil},
		{"ALTER TABLE orders ADD COLUMN kind text NOT NULL DEFAULT 'esims' CHECK (kind IN ('esims', 'topup'));", nil},
		{"ALTER TABLE orders ADD COLUMN n int NOT NULL DEFAULT 0, ADD COLUMN m int;", nil},
		{"CREATE INDEX CONCURRENTLY orders_note_idx ON orders (note);", nil},
		{"ALTER TABLE orders DROP CONSTRAINT orders_note_check;", nil},
		{"DROP INDEX orders_note_idx;", nil},
		// A table made by the same migration has no older readers.
		{"CREATE TABLE notes (id int);\nALTER TABLE notes ADD COLUMN body text NOT NULL;\nALTER TABLE notes RENAME COLUMN body TO text;", nil},
		// Words in comments, strings and function bodies' strings are not statements.
		{"-- we never DROP TABLE here\nSELECT 'DROP TABLE x';", nil},
		{"CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  RAISE EXCEPTION 'cannot RENAME %', OLD.id; -- nor DROP COLUMN\n  RETURN NEW;\nEND;\n$$;", nil},
		// Only the Up part counts: Down undoes the expansion.
		{"-- +goose Up\nALTER TABLE orders ADD COLUMN note text;\n-- +goose Down\nALTER TABLE orders DROP COLUMN note;", nil},
		// A justified contraction passes; an empty justification does not.
		{"-- contract: nothing has read it since 00004\nALTER TABLE orders DROP COLUMN legacy;", nil},
		{"ALTER TABLE orders\n    -- contract: filled by the esims_fill trigger for older releases\n    ALTER COLUMN plan_id SET NOT NULL;", nil},
		{"-- contract:\nALTER TABLE orders DROP COLUMN legacy;", []string{"DROP COLUMN"}},
	}
	for _, c := range cases {
		var got []string
		for _, f := range lintMigration(c.sql) {
			got = append(got, f.what)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("lint of\n%s\nfound %q, want %q", c.sql, got, c.want)
		}
	}

	// Ordering's 00006 dropped the outbox and the reservations' lease
	// under the release that used them.
	sql, err := os.ReadFile(filepath.Join(repoRoot(t), "services/ordering/postgres/migrations/00006_river.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range lintMigration(string(sql)) {
		got = append(got, fmt.Sprintf("%d %s", f.line, f.what))
	}
	if want := []string{"32 DROP TABLE", "34 DROP COLUMN"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lint of ordering's 00006 found %q, want %q", got, want)
	}
}

// finding is a statement that contracts the schema under the previous
// release.
type finding struct {
	line            int
	what, why, code string
}

var contracting = []struct {
	re        *regexp.Regexp
	what, why string
}{
	{regexp.MustCompile(`(?i)\bDROP\s+(TABLE|VIEW|MATERIALIZED\s+VIEW|TYPE|SCHEMA|SEQUENCE)\b`), "DROP %s", "the previous release may still read or write it"},
	{regexp.MustCompile(`(?i)\bDROP\s+COLUMN\b`), "DROP COLUMN", "the previous release may still read or write the column"},
	{regexp.MustCompile(`(?i)\bRENAME\b`), "RENAME", "the previous release still uses the old name"},
	{regexp.MustCompile(`(?i)\bALTER\s+(COLUMN\s+)?\S+\s+(SET\s+DATA\s+)?TYPE\b`), "ALTER COLUMN ... TYPE", "the previous release reads and writes the old type"},
	{regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`), "SET NOT NULL", "the previous release may insert rows without the column"},
}

var (
	createTable = regexp.MustCompile(`(?i)^\s*CREATE\s+(UNLOGGED\s+)?TABLE\s+(IF\s+NOT\s+EXISTS\s+)?("?[\w.]+"?)`)
	alterTable  = regexp.MustCompile(`(?i)^\s*ALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(ONLY\s+)?("?[\w.]+"?)`)
	addColumn   = regexp.MustCompile(`(?i)\bADD\s+COLUMN\b`)
	notNull     = regexp.MustCompile(`(?i)\bNOT\s+NULL\b`)
	hasDefault  = regexp.MustCompile(`(?i)\b(DEFAULT|GENERATED)\b`)
	marker      = regexp.MustCompile(`^\s*contract:\s*\S`)
	gooseDown   = regexp.MustCompile(`(?m)^\s*--\s*\+goose\s+Down\b`)
)

// lintMigration finds the statements of a goose migration's Up part that
// contract the schema under the previous release, leaving out those on
// tables the migration creates and those with a `-- contract: <why>`
// comment.
func lintMigration(sql string) []finding {
	if loc := gooseDown.FindStringIndex(sql); loc != nil {
		sql = sql[:loc[0]]
	}
	var findings []finding
	created := map[string]bool{}
	for _, st := range splitStatements(sql) {
		if m := createTable.FindStringSubmatch(st.code); m != nil {
			created[strings.Trim(m[3], `"`)] = true
			continue
		}
		if m := alterTable.FindStringSubmatch(st.code); m != nil && created[strings.Trim(m[3], `"`)] {
			continue
		}
		justified := false
		for _, c := range st.comments {
			justified = justified || marker.MatchString(c)
		}
		if justified {
			continue
		}
		code := strings.Join(strings.Fields(st.code), " ")
		if len(code) > 160 {
			code = code[:160] + " ..."
		}
		for _, rule := range contracting {
			if m := rule.re.FindStringSubmatch(st.code); m != nil {
				what := rule.what
				if strings.Contains(what, "%s") {
					what = fmt.Sprintf(what, strings.ToUpper(strings.Join(strings.Fields(m[1]), " ")))
				}
				findings = append(findings, finding{st.line, what, rule.why, code})
			}
		}
		if alterTable.MatchString(st.code) {
			for _, def := range addedColumns(st.code) {
				if notNull.MatchString(def) && !hasDefault.MatchString(def) {
					findings = append(findings, finding{st.line, "ADD COLUMN ... NOT NULL without DEFAULT", "the previous release inserts rows without the column", code})
				}
			}
		}
	}
	return findings
}

// addedColumns are the definitions of an ALTER TABLE's ADD COLUMN clauses,
// each up to the comma that ends it.
func addedColumns(code string) []string {
	var defs []string
	for _, loc := range addColumn.FindAllStringIndex(code, -1) {
		depth, end := 0, len(code)
	scan:
		for i := loc[1]; i < len(code); i++ {
			switch code[i] {
			case '(':
				depth++
			case ')':
				depth--
			case ',':
				if depth == 0 {
					end = i
					break scan
				}
			}
		}
		defs = append(defs, code[loc[1]:end])
	}
	return defs
}

// statement is one SQL statement: its code with comments and quoted
// text blanked out, the comments before and within it, and the line it
// starts on.
type statement struct {
	code     string
	comments []string
	line     int
}

var dollarTag = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z_0-9]*)?\$`)

// splitStatements splits SQL at the semicolons that end statements: not
// those in comments, quoted text or dollar-quoted bodies (whose code is
// kept, so a function that drops a table is still seen to).
func splitStatements(sql string) []statement {
	var (
		out      []statement
		cur      statement
		code     strings.Builder
		line     = 1
		inDollar = ""
	)
	flush := func() {
		cur.code = code.String()
		if strings.TrimSpace(cur.code) != "" {
			out = append(out, cur)
		}
		cur, code = statement{}, strings.Builder{}
	}
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\n':
			line++
			code.WriteByte(c)
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql) - i
			}
			cur.comments = append(cur.comments, sql[i+2:i+end])
			i += end - 1
		case strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				end = len(sql) - i - 2
			}
			body := sql[i+2 : i+2+end]
			cur.comments = append(cur.comments, body)
			line += strings.Count(body, "\n")
			i += end + 3
		case c == '\'':
			j := i + 1
			for j < len(sql) {
				if sql[j] == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			line += strings.Count(sql[i:min(j+1, len(sql))], "\n")
			code.WriteString("''")
			i = j
		case c == '$' && dollarTag.MatchString(sql[i:]):
			tag := dollarTag.FindString(sql[i:])
			if inDollar == "" {
				inDollar = tag
			} else if tag == inDollar {
				inDollar = ""
			}
			code.WriteByte(' ')
			i += len(tag) - 1
		case c == ';' && inDollar == "":
			flush()
		default:
			if cur.line == 0 && c != ' ' && c != '\t' && c != '\r' {
				cur.line = line
			}
			code.WriteByte(c)
		}
	}
	flush()
	return out
}
