package rollout

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/cmd/internal/loopbacktest"
	"github.com/esimplatform/esim/cmd/internal/services"
	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// binDir holds this run's builds of the current services.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollout-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// currentBinary is the service built from this tree. Every service that
// owns a database is built by one go build, once per test run: the tests
// need them all, and one go command shares its work among them.
func currentBinary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		root := repoRoot(t)
		args := []string{"build", "-o", binDir + string(filepath.Separator)}
		for _, s := range databaseServices(t) {
			args = append(args, "./services/"+s.Name+"/cmd/"+s.Name)
		}
		build := exec.Command("go", args...)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

func repoRoot(t testing.TB) string {
	t.Helper()
	path, err := services.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(path)
}

// databaseServices are the services of services.yaml that own a database.
func databaseServices(t testing.TB) []services.Service {
	var dbs []services.Service
	for _, s := range servicestest.Load(t) {
		if s.Database {
			dbs = append(dbs, s)
		}
	}
	if len(dbs) == 0 {
		t.Fatal("services.yaml declares no service with a database")
	}
	return dbs
}

// migrationVersions are the goose versions of the service's migrations in
// this tree, in order.
func migrationVersions(t testing.TB, name string) []int64 {
	t.Helper()
	files := migrationFiles(t, name)
	versions := make([]int64, len(files))
	for i, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: no version number before its first _", f)
		}
		versions[i] = n
	}
	return versions
}

// migrationFiles are the paths, from the repository's root, of the
// service's goose migrations, oldest first.
func migrationFiles(t testing.TB, name string) []string {
	t.Helper()
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "services", name, "postgres", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no migrations under services/%s/postgres/migrations (%v)", name, name, err)
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(root, f)
	}
	slices.Sort(files)
	return files
}

// stack is what a test's services share: the credentials of their
// callers, a Kafka broker, and the URLs of the services started so far,
// which later services are told to call.
type stack struct {
	t      *testing.T
	mu     sync.Mutex // guards tokens: traffic runs beside the test
	tokens map[internalauth.Caller]string
	kafka  []string
	urls   map[string]string
	// plan is what ordering's writes order.
	plan string
}

func newStack(t *testing.T) *stack {
	return &stack{t: t, tokens: map[internalauth.Caller]string{}, urls: map[string]string{}}
}

func (st *stack) token(c internalauth.Caller) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.tokens[c] == "" {
		st.tokens[c] = internalauth.NewToken()
	}
	return st.tokens[c]
}

// client calls a service's Twirp API as caller.
func (st *stack) client(c internalauth.Caller) *http.Client {
	return internalauth.Client(&http.Client{Timeout: 15 * time.Second}, st.token(c))
}

// settings are what each service needs besides what services.yaml
// implies: values that make run derives from its certificates or the
// gateway's address, and sizes that keep many replicas within the test
// server's connections.
var settings = map[string][]string{
	"catalogue": {"SEED_CATALOGUE=true"},
	// A gateway nobody runs: QR images are not fetched here.
	"ordering": {"QR_BASE_URL=http://127.0.0.1:1/qr", "ORDER_CONCURRENCY=4", "ORDERS_IN_FLIGHT_PER_ACCOUNT=2"},
}

// poolSizes are the connections a replica may open; idle pools hold few.
var poolSizes = map[string]int{"ordering": 12}

// env is service s's settings on database dbURL, as make run derives
// them from services.yaml: the tokens of its callers, and, when it calls
// others, its own token and their URLs (one never started here: calls to
// it fail, which no start needs).
func (st *stack) env(s services.Service, dbURL string) []string {
	env := []string{"LOG_LEVEL=info", "METRICS_ADDR=", "SHUTDOWN_TIMEOUT=5s"}
	if s.Database {
		env = append(env, "DATABASE_URL="+pgtest.WithMaxConns(st.t, dbURL, cmp.Or(poolSizes[s.Name], 5)))
	}
	callers := []string{internalauth.Entry(internalauth.Operator, st.token(internalauth.Operator))}
	for _, c := range servicestest.Load(st.t).CallersOf(s.Name) {
		callers = append(callers, internalauth.Entry(internalauth.Caller(c), st.token(internalauth.Caller(c))))
	}
	env = append(env, "CALLERS="+strings.Join(callers, ","))
	if len(s.Calls) > 0 {
		env = append(env, "INTERNAL_TOKEN="+st.token(internalauth.Caller(s.Name)))
		for _, callee := range s.Calls {
			c, _ := servicestest.Load(st.t).Get(callee)
			env = append(env, c.URLVar()+"="+cmp.Or(st.urls[callee], "http://127.0.0.1:1"))
		}
	}
	if s.Kafka {
		if st.kafka == nil {
			st.kafka = kafkatest.New(st.t).Config.Brokers
		}
		env = append(env, "KAFKA_BROKERS="+strings.Join(st.kafka, ","))
	}
	for _, name := range slices.Concat(s.Secrets, s.Keys) {
		env = append(env, name+"="+newSecret())
	}
	return append(env, settings[s.Name]...)
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// replica is one process of a service.
type replica struct {
	name, url, logPath string
	cmd                *exec.Cmd
	done               chan struct{} // closed when the process has exited
	waitErr            error         // valid after done
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// start runs bin on a free loopback address with env and nothing of the
// test's own environment but PATH and HOME: a developer's exported
// DATABASE_URL or KAFKA_BROKERS must not reach it. It is stopped when the
// test ends.
func start(t *testing.T, name, bin string, env []string) *replica {
	t.Helper()
	addr := loopbacktest.FreeAddr(t)
	r := &replica{name: name, url: "http://" + addr, logPath: filepath.Join(t.TempDir(), unsafeChars.ReplaceAllString(name, "_")+".log"), done: make(chan struct{})}
	logFile, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin)
	r.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "HTTP_ADDR=" + addr}, env...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// Should the test binary be killed outright, its services go too.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		logFile.Close()
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop sends SIGTERM and gives the process its drain before SIGKILL.
func (r *replica) stop(t *testing.T) {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Logf("%s did not stop within 15 s of SIGTERM and was killed; last lines of its log:\n%s", r.name, r.tail(20))
	}
}

// exited says how the process ended, or "" while it runs.
func (r *replica) exited() string {
	select {
	case <-r.done:
		return fmt.Sprintf("%s exited (%v); last lines of its log:\n%s", r.name, r.waitErr, r.tail(30))
	default:
		return ""
	}
}

// waitReady polls /readyz until it answers 200, the process ends or ctx
// does.
func (r *replica) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + " " + string(bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-r.done:
			return fmt.Errorf("%s during start", r.exited())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s/readyz before the test's deadline (last answer: %s); last lines of its log:\n%s", r.name, r.url, last, r.tail(30))
		case <-tick.C:
		}
	}
}

// tail is the last n lines of the replica's log, indented.
func (r *replica) tail(n int) string {
	data, err := os.ReadFile(r.logPath)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// checkMigratedOnce fails the test unless every migration of the service
// is recorded exactly once in dbURL's goose table, and River's, where the
// service's migrations move work into River's tables, each once too.
func checkMigratedOnce(t *testing.T, ctx context.Context, name, dbURL string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
	if err != nil {
		t.Fatalf("%s: read goose_db_version: %v", name, err)
	}
	type applied struct{ Version, Times int64 }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[applied])
	if err != nil {
		t.Fatal(err)
	}
	want := migrationVersions(t, name)
	var versions []int64
	for _, a := range got {
		versions = append(versions, a.Version)
		if a.Times != 1 {
			t.Errorf("%s: migration %d recorded %d times", name, a.Version, a.Times)
		}
	}
	if !slices.Equal(versions, want) {
		t.Errorf("%s: goose_db_version has versions %v, want %v", name, versions, want)
	}

	usesRiver := false
	for _, f := range migrationFiles(t, name) {
		sql, _ := os.ReadFile(filepath.Join(repoRoot(t), f))
		usesRiver = usesRiver || bytes.Contains(sql, []byte("river_job"))
	}
	if !usesRiver {
		return
	}
	var total, distinct, top int64
	err = conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT (line, version)), coalesce(max(version), 0) FROM river_migration WHERE line = 'main'`).Scan(&total, &distinct, &top)
	if err != nil {
		t.Fatalf("%s: read river_migration: %v", name, err)
	}
	if total == 0 || total != distinct || total != top {
		t.Errorf("%s: river_migration holds %d rows of %d versions up to %d, want versions 1..%d once each", name, total, distinct, top, top)
	}
}
