package rollout

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// TestRollingUpgradeKeepsOldReplicasServing is a rolling upgrade of every
// service with a database to this tree from its previous release: the
// tree just before its newest migration, built from git history. A
// replica of the previous release serves writes and reads while a
// replica of this tree starts beside it and applies the new migration to
// the same database, and goes on serving after: not one call may fail.
func TestRollingUpgradeKeepsOldReplicasServing(t *testing.T) {
	for _, s := range databaseServices(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			w, ok := workloads[s.Name]
			if !ok {
				t.Fatalf("no workload for %s: add its requests to workloads (traffic_test.go)", s.Name)
			}
			commit, oldBin := previousRelease(t, s.Name)
			if oldBin == "" {
				t.Logf("%s's newest migration came with the service itself (%s has no services/%s): there is no release to upgrade from", s.Name, commit, s.Name)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			st := newStack(t)
			for _, name := range w.needs {
				dep, _ := servicestest.Load(t).Get(name)
				r := start(t, name, currentBinary(t, name), st.env(dep, pgtest.NewDatabase(t)))
				if err := r.waitReady(ctx); err != nil {
					t.Fatal(err)
				}
				st.urls[name] = r.url
			}
			db := pgtest.NewDatabase(t)
			env := st.env(s, db) // one Deployment: the same settings and secrets
			old := start(t, s.Name+" "+commit[:10], oldBin, env)
			if err := old.waitReady(ctx); err != nil {
				t.Fatalf("the previous release: %v", err)
			}
			if w.prepare != nil {
				if err := w.prepare(ctx, st); err != nil {
					t.Fatal(err)
				}
			}

			// The old replica's traffic, counted by phase: before the new
			// replica starts, while it starts (and migrates), after.
			const before, during, after = 0, 1, 2
			var (
				mu     sync.Mutex
				phase  = before
				done   [3]int
				failed [3][]string
				woke   = make(chan struct{}, 1)
			)
			setPhase := func(p int) { mu.Lock(); phase = p; mu.Unlock() }
			// waitCalls waits until n calls have ended in phase p.
			waitCalls := func(p, n int) {
				for {
					mu.Lock()
					got := done[p]
					mu.Unlock()
					if got >= n {
						return
					}
					select {
					case <-woke:
					case <-ctx.Done():
						t.Fatalf("the previous release answered %d calls, not %d, before the test's deadline; %s", got, n, old.tail(30))
					}
				}
			}
			trafficCtx, stopTraffic := context.WithCancel(ctx)
			trafficDone := make(chan struct{})
			go func() {
				defer close(trafficDone)
				for trafficCtx.Err() == nil {
					mu.Lock()
					p := phase
					mu.Unlock()
					err := errors.Join(w.write(trafficCtx, st, old.url), w.read(trafficCtx, st, old.url))
					if trafficCtx.Err() != nil {
						return // cut short by the test's end, not failed
					}
					mu.Lock()
					done[p]++
					if err != nil {
						failed[p] = append(failed[p], err.Error())
					}
					mu.Unlock()
					select {
					case woke <- struct{}{}:
					default:
					}
				}
			}()
			defer func() { stopTraffic(); <-trafficDone }()

			waitCalls(before, 3)
			setPhase(during)
			current := start(t, s.Name+" current", currentBinary(t, s.Name), env)
			if err := current.waitReady(ctx); err != nil {
				t.Fatalf("this tree's replica beside the previous release's: %v", err)
			}
			setPhase(after)
			checkMigratedOnce(t, ctx, s.Name, db)
			if err := errors.Join(w.write(ctx, st, current.url), w.read(ctx, st, current.url)); err != nil {
				t.Errorf("this tree's replica: %v", err)
			}
			waitCalls(after, 5)
			stopTraffic()
			<-trafficDone

			broken := false
			for p, name := range []string{"before", "while", "after"} {
				t.Logf("the previous release (%s) answered %d calls %s this tree's replica started, %d failed", commit[:10], done[p], name, len(failed[p]))
				if len(failed[p]) > 0 {
					t.Errorf("%d of %d calls to the previous release (%s) failed %s this tree's replica started and migrated; the first: %s\n"+
						"its newest migration breaks the code of the release before it: migrations must be expand-only (docs/conventions.md, \"Migrations\")",
						len(failed[p]), done[p], commit[:10], name, failed[p][0])
					broken = true
				}
			}
			if broken {
				t.Logf("the previous release's log:\n%s", old.tail(40))
			}
			for _, r := range []*replica{old, current} {
				if exit := r.exited(); exit != "" {
					t.Error(exit)
				}
			}
		})
	}
}

// previousRelease is the commit before the one that added the service's
// newest migration (HEAD, when that migration is not committed yet), and
// the service's binary built from it, or "" when the service did not
// exist then. The history must be there: a shallow clone fails the test.
func previousRelease(t *testing.T, name string) (commit, bin string) {
	t.Helper()
	root := repoRoot(t)
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	shallow, err := git("rev-parse", "--is-shallow-repository")
	if err != nil {
		t.Fatalf("the rolling upgrade of %s builds its previous release from git history, and %s is not a git clone (%v)", name, root, err)
	}
	if shallow == "true" {
		t.Fatalf("the rolling upgrade of %s builds its previous release from git history, which this shallow clone lacks: run `git fetch --unshallow` (CI clones in full)", name)
	}
	files := migrationFiles(t, name)
	newest := filepath.ToSlash(files[len(files)-1])
	if _, err := git("cat-file", "-e", "HEAD:"+newest); err != nil {
		commit, err = git("rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
	} else {
		added, err := git("log", "-1", "--format=%H", "--diff-filter=A", "--", newest)
		if err != nil || added == "" {
			t.Fatalf("no commit in the history adds %s (%v)", newest, err)
		}
		if commit, err = git("rev-parse", "--verify", "--quiet", added+"^"); err != nil {
			t.Fatalf("%s came with the repository's first commit %s: there is no release before it", newest, added)
		}
	}
	if _, err := git("cat-file", "-e", commit+":services/"+name+"/cmd/"+name+"/main.go"); err != nil {
		return commit, ""
	}
	return commit, buildRelease(t, root, commit, name)
}

// buildRelease builds the service as of commit, once per machine: the
// binary is kept in the tools cache (ESIM_TOOLS_CACHE, as the Makefile
// sets it), under releases/<service>/, beside nothing older.
func buildRelease(t *testing.T, root, commit, name string) string {
	t.Helper()
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("ESIM_TOOLS_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "esim-tools")
	}
	dir := filepath.Join(cache, "releases", name)
	bin := filepath.Join(dir, commit+"-"+strings.TrimSpace(string(goVersion)))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tree)

	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = root
	extract := exec.Command("tar", "-x", "-C", tree)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	extract.Stdin = pipe
	var archiveErr, extractErr strings.Builder
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", commit, err, extractErr.String())
	}

	// Not -trimpath: the modules the commit shares with this tree are then
	// compiled as this run's builds of the current services compiled them
	// (same module cache paths), and the build cache serves them; only the
	// commit's own packages are compiled afresh. GOWORK is cleared so the
	// commit's own go.work is the workspace.
	t.Logf("building %s as of %s (once per machine: kept in %s)", name, commit[:10], dir)
	partial := bin + ".partial"
	build := exec.Command("go", "build", "-o", partial, "./services/"+name+"/cmd/"+name)
	build.Dir = tree
	build.Env = append(os.Environ(), "GOWORK=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s as of %s: %v\n%s", name, commit, err, out)
	}
	if err := os.Rename(partial, bin); err != nil {
		t.Fatal(err)
	}
	// Older releases of the service are of no more use.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if path := filepath.Join(dir, e.Name()); path != bin && !e.IsDir() && !strings.HasSuffix(e.Name(), ".partial") {
			_ = os.Remove(path)
		}
	}
	return bin
}
