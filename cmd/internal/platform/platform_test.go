package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/cmd/internal/loopbacktest"
	"github.com/esimplatform/esim/cmd/internal/platform/redistest"
	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

func TestPreflightNamesEachMissingDependencyAndHowToStartIt(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	addrs := servicestest.FreeAddrs(t, servicestest.Load(t))
	addrs[Gateway] = busy.Addr().String()
	_, err = Start(context.Background(), Options{
		PGURL:    "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		RedisURL: "redis://127.0.0.1:1/0",
		Addrs:    addrs,
		BinDir:   t.TempDir(),
		RunDir:   t.TempDir(),
		install:  fakeInstall([]string{"pg_ctlcluster", "redis-server"}, "15 main 5432 online\n16 main 1 down\n"),
	})
	if err == nil {
		t.Fatal("Start succeeded without Postgres and Redis")
	}
	msg := err.Error()
	for _, want := range []string{
		// Where it looked, whatever form postgres.Redact gives the URL
		// without its password.
		"Postgres is not answering at postgres://postgres", "@127.0.0.1:1/postgres", "PG_URL",
		"start it with: pg_ctlcluster --skip-systemctl-redirect 16 main start",
		"Redis is not answering at redis://127.0.0.1:1/0", "REDIS_URL", "redis-server --daemonize yes --bind 127.0.0.1 --port 1 ",
		"gateway address " + busy.Addr().String() + " is not free",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
	for _, unwanted := range []string{"hunter2", "--port 6379", "15 main"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("preflight error contains %q:\n%s", unwanted, msg)
		}
	}
}

// preflightError starts the platform with pgURL and redisURL and returns the
// error, which must be a preflight failure.
func preflightError(t *testing.T, pgURL, redisURL string) string {
	t.Helper()
	_, err := Start(context.Background(), Options{
		PGURL: pgURL, RedisURL: redisURL,
		Addrs:  servicestest.FreeAddrs(t, servicestest.Load(t)),
		BinDir: t.TempDir(), RunDir: t.TempDir(),
	})
	if err == nil || !strings.Contains(err.Error(), "preflight failed") {
		t.Fatalf("Start(PG_URL %q, REDIS_URL %q): %v; want a preflight failure", pgURL, redisURL, err)
	}
	return err.Error()
}

// A Postgres that is up but turns the login down needs PG_URL fixed, not
// Postgres started; the server's reason is said once, not once per attempt.
func TestPreflightTellsARefusedPostgresLoginFromAMissingServer(t *testing.T) {
	for _, tc := range []struct {
		user, database, reason string
	}{
		{"esim_no_such_role", "postgres", `FATAL: role "esim_no_such_role" does not exist (SQLSTATE 28000)`},
		{"", "esim_no_such_database", `FATAL: database "esim_no_such_database" does not exist (SQLSTATE 3D000)`},
	} {
		u, err := url.Parse(pgtest.AdminURL())
		if err != nil {
			t.Fatal(err)
		}
		if tc.user != "" {
			u.User = url.UserPassword(tc.user, "hunter2")
		}
		u.Path = "/" + tc.database
		// No sslmode: pgx then tries with and without TLS, and reported
		// the refusal twice.
		u.RawQuery = ""
		msg := preflightError(t, u.String(), redistest.URL())
		for _, want := range []string{
			"Postgres at postgres://", "@" + u.Host + "/" + tc.database + " refused the connection: " + tc.reason,
			"check the user, password and database in PG_URL (or -pg-url)",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("preflight error lacks %q:\n%s", want, msg)
			}
		}
		if n := strings.Count(msg, "does not exist"); n != 1 {
			t.Errorf("the server's reason is given %d times, want once:\n%s", n, msg)
		}
		for _, unwanted := range []string{"not answering", "pg_ctlcluster", "hunter2"} {
			if strings.Contains(msg, unwanted) {
				t.Errorf("preflight error contains %q:\n%s", unwanted, msg)
			}
		}
	}
}

func TestPreflightRejectsAPGURLThatDoesNotParse(t *testing.T) {
	for pgURL, problem := range map[string]string{
		"not a url": "invalid keyword/value",
		"postgres://postgres:hunter2@127.0.0.1:nine/postgres": "invalid port",
	} {
		msg := preflightError(t, pgURL, redistest.URL())
		for _, want := range []string{"PG_URL is not a valid Postgres URL: ", problem, "set PG_URL or -pg-url to one like postgres://"} {
			if !strings.Contains(msg, want) {
				t.Errorf("PG_URL %q: preflight error lacks %q:\n%s", pgURL, want, msg)
			}
		}
		// Neither the input (which may hold a password) nor a start hint.
		for _, unwanted := range []string{pgURL, "hunter2", "not answering", "pg_ctlcluster"} {
			if strings.Contains(msg, unwanted) {
				t.Errorf("PG_URL %q: preflight error contains %q:\n%s", pgURL, unwanted, msg)
			}
		}
	}
}

// A password with an unencoded @ would leave its tail in the host pgx
// reads, and so in the dial error and the start hint: refused first.
func TestPreflightRefusesAPasswordWithAnUnencodedAt(t *testing.T) {
	msg := preflightError(t, "postgres://postgres:hun@ter2@127.0.0.1:1/postgres", redistest.URL())
	if !strings.Contains(msg, "PG_URL: ") || !strings.Contains(msg, "%40") {
		t.Errorf("preflight error does not say what is wrong:\n%s", msg)
	}
	for _, unwanted := range []string{"ter2", "hun", "not answering"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("preflight error contains %q:\n%s", unwanted, msg)
		}
	}
}

// pgx reports a failure once per address and TLS attempt; the preflight
// says each distinct reason once.
func TestConnectCauseSaysEachReasonOnce(t *testing.T) {
	lookup := errors.New("lookup db.invalid: no such host")
	refused := errors.New("127.0.0.1:5432 (localhost): dial error: connection refused")
	// As pgx says a failed dial: the address, then net's own error, which
	// names the address again.
	dialRefused := func(port int) error {
		return fmt.Errorf("127.0.0.1:%d (127.0.0.1): dial error: %w", port, &net.OpError{
			Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
			Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED},
		})
	}
	for err, want := range map[error]string{
		fmt.Errorf("hostname resolving error: %w", errors.Join(lookup, lookup)):             "hostname resolving error: lookup db.invalid: no such host",
		errors.Join(refused, errors.New("[::1]:5432 (localhost): tls error: EOF"), refused): "127.0.0.1:5432 (localhost): dial error: connection refused; [::1]:5432 (localhost): tls error: EOF",
		// Two hosts, each tried with and without TLS: each host's reason.
		errors.Join(dialRefused(1), dialRefused(1), dialRefused(2), dialRefused(2)): "dial tcp 127.0.0.1:1: connect: connection refused; dial tcp 127.0.0.1:2: connect: connection refused",
	} {
		if got := connectCause(err); got.Error() != want || !errors.Is(got, err) {
			t.Errorf("connectCause(%q) = %q, want %q wrapping the original", err, got, want)
		}
	}
}

// A server that answers but whose TLS the client turns down (or that has
// no TLS) is up: the message says to fix sslmode, not to start it.
func TestPreflightTellsATLSFailureFromAMissingServer(t *testing.T) {
	u, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	// The local server's certificate does not name 127.0.0.1 (and is not
	// signed by a CA this machine trusts); a server without TLS refuses it.
	u.RawQuery = "sslmode=verify-full"
	// Postgres installed, so that a start hint given by mistake would show
	// whatever this machine has.
	err = checkPostgres(context.Background(), u.String(), fakeInstall([]string{"pg_ctlcluster"}, "16 main "+u.Port()+" online\n"))
	if err == nil {
		t.Skipf("Postgres at %s passes sslmode=verify-full; no TLS failure to report", u.Redacted())
	}
	msg := err.Error()
	for _, want := range []string{
		"Postgres at postgres://", "@" + u.Host + "/", " answered but the connection failed: ",
		"check the sslmode and TLS settings in PG_URL (or -pg-url)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
	for _, unwanted := range []string{"not answering", "pg_ctlcluster", "start ", "install"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("preflight error contains %q:\n%s", unwanted, msg)
		}
	}
}

// With several hosts in PG_URL, each one's reason is given.
func TestPreflightNamesEachPostgresHostThatIsNotAnswering(t *testing.T) {
	install := fakeInstall([]string{"pg_ctlcluster"}, "16 main 1 down\n")
	err := checkPostgres(context.Background(), "postgres://postgres:hunter2@127.0.0.1:1,127.0.0.1:2/postgres?connect_timeout=2", install)
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"Postgres is not answering at postgres://postgres@127.0.0.1:1,127.0.0.1:2/postgres ",
		": dial tcp 127.0.0.1:1: connect: connection refused; dial tcp 127.0.0.1:2: connect: connection refused\n",
		"pg_ctlcluster --skip-systemctl-redirect 16 main start",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("preflight error contains the password:\n%s", msg)
	}
}

// Start rewrites PG_URL's database, which it can do only to a URL; the
// message does not show the key=value input (or a URL made from it).
func TestDatabaseURLAsksForAURLInsteadOfKeyValue(t *testing.T) {
	_, err := databaseURL("host=127.0.0.1 user=u password=hunter2 dbname=x", "accounts")
	want := "PG_URL is in key=value form; give it as a postgres:// URL (like " + DefaultPGURL + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("databaseURL(key=value) error %v, want %q", err, want)
	}
	got, err := databaseURL("postgres://u:hunter2@h1:1,h2:2/x?sslmode=disable", "accounts")
	if want := "postgres://u:hunter2@h1:1,h2:2/accounts?sslmode=disable"; err != nil || got != want {
		t.Fatalf("databaseURL(multi-host) = %q, %v; want %q", got, err, want)
	}
}

func TestRedisStartHintFollowsREDIS_URLAndWhatIsInstalled(t *testing.T) {
	installed := fakeInstall([]string{"redis-server"}, "")
	missing := fakeInstall(nil, "")
	for _, tc := range []struct {
		redisURL string
		install  *localInstall
		want     string
	}{
		{"redis://127.0.0.1:6399/0", installed, `start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6399 --save "" --appendonly no`},
		{"redis://localhost:6400", installed, `start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6400 --save "" --appendonly no`},
		{"redis://[::1]:6401", installed, `start it with: redis-server --daemonize yes --bind ::1 --port 6401 --save "" --appendonly no`},
		{"redis://:pw@cache.internal:6402", installed, "start Redis at cache.internal:6402, or point REDIS_URL at a running server"},
		{"unix:///tmp/esim-redis.sock", installed, `start it with: redis-server --daemonize yes --port 0 --unixsocket /tmp/esim-redis.sock --save "" --appendonly no`},
		{"redis://127.0.0.1:6399/0", missing, "install it with: apt-get install redis-server (no redis-server on PATH)\n" +
			`    then start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6399 --save "" --appendonly no`},
		{"unix:///tmp/esim-redis.sock", missing, "install it with: apt-get install redis-server (no redis-server on PATH)\n" +
			`    then start it with: redis-server --daemonize yes --port 0 --unixsocket /tmp/esim-redis.sock --save "" --appendonly no`},
		// Installing it here would not start the one REDIS_URL names.
		{"redis://:pw@cache.internal:6402", missing, "start Redis at cache.internal:6402, or point REDIS_URL at a running server"},
	} {
		opts, err := redis.ParseURL(tc.redisURL)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.install.redisStartHint(opts); got != tc.want {
			t.Errorf("REDIS_URL %s, redis-server installed %t: hint\n  %s\nwant\n  %s",
				tc.redisURL, tc.install == installed, got, tc.want)
		}
	}
}

func TestPostgresStartHintFollowsPG_URLAndTheInstalledClusters(t *testing.T) {
	// As pg_lsclusters prints them: 15 was upgraded to 16, which took over
	// its port, and a 16 cluster of its own runs beside it.
	const clusters = "9.6 main 5434 down postgres /var/lib/postgresql/9.6/main /var/log/postgresql/postgresql-9.6-main.log\n" +
		"15  main 5432 down postgres /var/lib/postgresql/15/main  /var/log/postgresql/postgresql-15-main.log\n" +
		"16  main 5432 down postgres /var/lib/postgresql/16/main  /var/log/postgresql/postgresql-16-main.log\n" +
		"16  esim 5433 down postgres /var/lib/postgresql/16/esim  /var/log/postgresql/postgresql-16-esim.log\n"
	installed := fakeInstall([]string{"pg_ctlcluster"}, clusters)
	withoutCommand := fakeInstall(nil, clusters)
	withoutClusters := fakeInstall([]string{"pg_ctlcluster"}, "")
	const debianAuth = "\n    Debian's cluster then wants trust auth in pg_hba.conf, or a password in PG_URL"
	for _, tc := range []struct {
		host    string
		port    uint16
		install *localInstall
		want    string
	}{
		{"127.0.0.1", 5432, installed, "start it with: pg_ctlcluster --skip-systemctl-redirect 16 main start"},
		{"localhost", 5433, installed, "start it with: pg_ctlcluster --skip-systemctl-redirect 16 esim start"},
		{"::1", 5434, installed, "start it with: pg_ctlcluster --skip-systemctl-redirect 9.6 main start"},
		{"/var/run/postgresql", 5433, installed, "start it with: pg_ctlcluster --skip-systemctl-redirect 16 esim start"},
		{"127.0.0.1", 5435, installed, "no Postgres cluster here is set to port 5435 (found 9.6/main on 5434, 15/main on 5432, 16/main on 5432, 16/esim on 5433): change the port in PG_URL,\n" +
			"    or create a cluster on 5435 with: pg_createcluster --start -p 5435 16 esim5435"},
		{"127.0.0.1", 5432, withoutCommand, "install it with: apt-get install postgresql (no pg_ctlcluster on PATH)" + debianAuth},
		{"127.0.0.1", 5432, withoutClusters, "install it with: apt-get install postgresql (pg_lsclusters lists no cluster)" + debianAuth},
		{"db.internal", 5432, withoutCommand, "start Postgres at db.internal:5432, or point PG_URL at a running server"},
		{"::2", 5432, installed, "start Postgres at [::2]:5432, or point PG_URL at a running server"},
	} {
		if got := tc.install.postgresStartHint(tc.host, tc.port); got != tc.want {
			t.Errorf("Postgres at %s port %d: hint\n  %s\nwant\n  %s", tc.host, tc.port, got, tc.want)
		}
	}
	// Where the tests' Postgres is this machine's own Debian cluster, the
	// real pg_lsclusters is read as the fake is.
	if _, err := exec.LookPath("pg_lsclusters"); err == nil && os.Getenv("TEST_DATABASE_URL") == "" {
		if clusters := thisMachine().postgresClusters(); len(clusters) == 0 {
			t.Error("pg_lsclusters lists no cluster here, where the tests' Postgres runs")
		}
	}
}

// fakeInstall is a machine with commands on its PATH whose pg_lsclusters
// prints clusters.
func fakeInstall(commands []string, clusters string) *localInstall {
	return &localInstall{
		lookPath: func(file string) (string, error) {
			if slices.Contains(commands, file) {
				return "/usr/bin/" + file, nil
			}
			return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
		},
		listClusters: func() ([]byte, error) { return []byte(clusters), nil },
	}
}

// A Redis that answers with an error needs REDIS_URL fixed, not Redis
// started.
func TestPreflightTellsARefusedRedisFromAMissingOne(t *testing.T) {
	// The real Redis, with credentials it does not know: it answers, and
	// refuses.
	u, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("nouser", "s3cr3t")
	msg := preflightError(t, pgtest.AdminURL(), u.String())
	for _, want := range []string{
		"Redis at " + u.Redacted() + " refused the connection: WRONGPASS",
		"check the user, password and database number in REDIS_URL (or -redis-url)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
	for _, unwanted := range []string{"not answering", "redis-server", "Postgres", "s3cr3t"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("preflight error contains %q:\n%s", unwanted, msg)
		}
	}
}

// A service that stops by itself is reported with its exit status or
// signal, including status 0, for which Wait's error is nil.
func TestAServiceThatStopsSaysHow(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct{ script, how string }{
		{"echo bye; exit 0", "exited with status 0"},
		{"exit 7", "exited with status 7"},
		{"kill -KILL $$", "was killed by signal 9 (killed)"},
	} {
		spec := childSpec{
			name: Gateway, addr: "127.0.0.1:1", url: "http://127.0.0.1:1",
			bin:     filepath.Join(dir, Gateway+strconv.Itoa(i)),
			logPath: filepath.Join(dir, Gateway+strconv.Itoa(i)+".log"),
		}
		if err := os.WriteFile(spec.bin, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		c, err := startChild(spec, exited)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			want := fmt.Sprintf("gateway (pid %d) %s without being asked to stop; last lines of %s", c.pid(), tc.how, spec.logPath)
			if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "<nil>") {
				t.Errorf("%q: exit reported as\n%v\nwant %q", tc.script, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: exit not reported within 10 s", tc.script)
		}
		err = c.waitReady(context.Background(), 10*time.Second)
		if want := "gateway " + tc.how + " during start"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: waitReady = %v, want %q", tc.script, err, want)
		}
	}
}

func TestStartReportsTheLogOfAServiceThatDies(t *testing.T) {
	bin := t.TempDir()
	// Stand-ins that behave like a service failing at start (accounts) and
	// like services that never become ready: what Start must explain.
	scripts := map[string]string{}
	for _, name := range servicestest.Load(t).Names() {
		scripts[name] = "#!/bin/sh\nexec sleep 60\n"
	}
	scripts[Accounts] = "#!/bin/sh\necho 'config: DATABASE_URL is broken' >&2\nexit 3\n"
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := Start(context.Background(), Options{
		PGURL: pgtest.AdminURL(), RedisURL: redistest.URL(),
		Addrs:  servicestest.FreeAddrs(t, servicestest.Load(t)),
		BinDir: bin, RunDir: t.TempDir(), ReadyTimeout: 3 * time.Second, StopGrace: time.Second,
		// Start creates the services' databases before it runs them: these
		// are dropped at the end, unlike a developer's esim_ ones.
		DatabasePrefix: pgtest.DatabasePrefix(t, servicestest.Databases(servicestest.Load(t))...),
	})
	if err == nil {
		t.Fatal("Start succeeded with a dying accounts service")
	}
	for _, want := range []string{"accounts exited with status 3 during start", "config: DATABASE_URL is broken",
		"catalogue not ready within 3s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("Start took %s to give up", time.Since(start))
	}
}

// TestStartServesTheAPIAndRestartsWithANewKey runs the real service
// binaries, built from this workspace, the way `make run` does.
func TestStartServesTheAPIAndRestartsWithANewKey(t *testing.T) {
	// Exported in a developer's shell, METRICS_ADDR would send all three
	// services to one port; Start clears it for them.
	t.Setenv("METRICS_ADDR", loopbacktest.FreeAddr(t))
	bin := t.TempDir()
	declared := servicestest.Build(t, bin)
	opts := Options{
		PGURL: pgtest.AdminURL(), RedisURL: redistest.URL(),
		Addrs:  servicestest.FreeAddrs(t, declared),
		BinDir: bin, RunDir: t.TempDir(), KeyName: "platform test",
		// Databases of its own: a developer's `make run` data stays untouched.
		DatabasePrefix: pgtest.DatabasePrefix(t, servicestest.Databases(declared)...),
	}
	ctx := context.Background()

	first, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	if first.DemoAccountID != DemoAccountID || !strings.HasPrefix(first.SandboxKey, "sk_sandbox_") {
		t.Fatalf("demo account %q, key %q", first.DemoAccountID, first.SandboxKey)
	}
	wantStatus(t, first.APIBaseURL+"/plans?limit=1", first.SandboxKey, http.StatusOK)
	wantStatus(t, first.APIBaseURL+"/plans?limit=1", "sk_sandbox_wrong", http.StatusUnauthorized)
	// The live key orders from the SM-DP+ simulator, over mutual TLS with
	// the development certificates, on balance the start topped up.
	if !strings.HasPrefix(first.LiveKey, "sk_live_") || first.DemoLiveBalance != DemoSandboxBalance {
		t.Fatalf("live key %q, live balance %d", first.LiveKey, first.DemoLiveBalance)
	}
	smdp, iccid, esimID := liveOrder(t, first)
	if smdp != "smdp-sim.esim.invalid" {
		t.Errorf("a live eSIM from SM-DP+ %q, want the simulator's", smdp)
	}
	// Installed on a device, the profile is reported to ordering's ES2+
	// listener over mutual TLS, which accepts both reports.
	if errs := install(t, first, iccid); errs[0] != "" || errs[1] != "" {
		t.Errorf("ordering's answers to the install's notifications: %q", errs)
	}
	var esim struct {
		Data struct {
			Status      string `json:"status"`
			InstalledAt string `json:"installed_at"`
		} `json:"data"`
	}
	getJSON(t, first.APIBaseURL+"/esims/"+esimID, first.LiveKey, &esim)
	if esim.Data.Status != "INSTALLED" || esim.Data.InstalledAt == "" {
		t.Errorf("the installed live eSIM: %+v", esim.Data)
	}
	// Attached and used on the simulated network, it is ACTIVE with the
	// bytes used once ordering's usage read (every USAGE_INTERVAL) ran.
	device := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, first.URL(SMDPSim)+"/control/profiles/"+iccid+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+first.Secret(SMDPSim, "CONTROL_TOKEN"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	device("/attach", "")
	device("/use", `{"bytes":1048576}`)
	waitForUsage(t, first, esimID, 1<<20)
	// The simulator's control API answers the token of this start only.
	control := first.URL(SMDPSim) + "/control/state"
	token := first.Secret(SMDPSim, "CONTROL_TOKEN")
	if len(token) < 32 {
		t.Fatalf("the simulator's CONTROL_TOKEN %q", token)
	}
	wantStatus(t, control, token, http.StatusOK)
	wantStatus(t, control, "", http.StatusUnauthorized)
	wantStatus(t, control, token[1:], http.StatusUnauthorized)
	// The demo user signs in to the portal with the password printed.
	if status := portalSignIn(t, first.PortalURL, DemoPortalEmail, first.DemoPortalPassword); status != http.StatusSeeOther {
		t.Errorf("the demo user's sign-in at %s answered %d, want 303 to the portal", first.PortalURL, status)
	}
	ca, err := os.ReadFile(filepath.Join(opts.RunDir, CertsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	// A hundred newer keys push the first start's key off the first page
	// of the demo account's keys: the rerun must still find it.
	accounts := accountsv1.NewAccountsProtobufClient(first.URL(Accounts), internalauth.Client(http.DefaultClient, first.OperatorToken))
	for range 100 {
		if _, err := accounts.CreateKey(ctx, &accountsv1.CreateKeyRequest{
			AccountId: DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Name: "filler",
		}); err != nil {
			t.Fatal(err)
		}
	}
	pids := first.Services()
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, s := range pids {
		if err := syscall.Kill(s.PID, 0); err == nil {
			t.Errorf("%s (pid %d) still running after Stop", s.Name, s.PID)
		}
	}

	// A rerun keeps the data, prints a new working key and retires the old.
	second, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	t.Cleanup(func() {
		// Leave the shared demo account without a working test key.
		if err := second.RevokeKeys(ctx); err != nil {
			t.Error(err)
		}
		if err := second.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if second.SandboxKey == first.SandboxKey || second.DemoAccountID != first.DemoAccountID {
		t.Fatalf("second start: account %s key %s", second.DemoAccountID, second.SandboxKey)
	}
	// The rerun's password replaced the first's.
	if status := portalSignIn(t, second.PortalURL, DemoPortalEmail, first.DemoPortalPassword); status == http.StatusSeeOther {
		t.Error("the first start's portal password still signs in after the rerun")
	}
	// The development CA is kept: certificates handed out stay trusted.
	if again, err := os.ReadFile(filepath.Join(opts.RunDir, CertsDir, "ca.crt")); err != nil || string(again) != string(ca) {
		t.Errorf("the rerun made a new development CA (%v)", err)
	}
	wantStatus(t, second.APIBaseURL+"/plans?limit=1", second.SandboxKey, http.StatusOK)
	// A new control token each start: the first's no longer works.
	if next := second.Secret(SMDPSim, "CONTROL_TOKEN"); next == token || next == "" {
		t.Errorf("the rerun's CONTROL_TOKEN %q, want a new one", next)
	}
	wantStatus(t, second.URL(SMDPSim)+"/control/state", token, http.StatusUnauthorized)
	wantStatus(t, second.URL(SMDPSim)+"/control/state", second.Secret(SMDPSim, "CONTROL_TOKEN"), http.StatusOK)
	// The gateway's auth cache lives in Redis and outlives the restart;
	// the design allows a revocation 5 s to take effect.
	deadline := time.Now().Add(5 * time.Second)
	for status(t, second.APIBaseURL+"/plans?limit=1", first.SandboxKey) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the previous start's key still works 5 s after the rerun revoked it")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// liveOrder orders one eSIM with p's live key and returns its SM-DP+.
func liveOrder(t *testing.T, p *Platform) (smdpAddress, iccid, id string) {
	t.Helper()
	var plans struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, p.APIBaseURL+"/plans?limit=1&type=fixed", p.LiveKey, &plans)
	if len(plans.Data) != 1 {
		t.Fatalf("no plan: %+v", plans)
	}
	req, _ := http.NewRequest(http.MethodPost, p.APIBaseURL+"/orders", strings.NewReader(`{"plan_id":"`+plans.Data[0].ID+`"}`))
	req.Header.Set("Authorization", "Bearer "+p.LiveKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var order struct {
		Data struct {
			Esims []struct {
				SMDPAddress string `json:"smdp_address"`
				ICCID       string `json:"iccid"`
				ID          string `json:"id"`
			} `json:"esims"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&order); err != nil || resp.StatusCode != http.StatusCreated || len(order.Data.Esims) != 1 {
		t.Fatalf("live order: %d %+v %v", resp.StatusCode, order, err)
	}
	e := order.Data.Esims[0]
	return e.SMDPAddress, e.ICCID, e.ID
}

// waitForUsage polls the partner API until the live eSIM id is ACTIVE
// with used bytes, or fails the test after a minute (the usage read runs
// every 10 s under make run).
func waitForUsage(t *testing.T, p *Platform, id string, used int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var e struct {
			Data struct {
				Status string `json:"status"`
				Data   struct {
					UsedBytes int64 `json:"used_bytes"`
				} `json:"data"`
			} `json:"data"`
		}
		getJSON(t, p.APIBaseURL+"/esims/"+id, p.LiveKey, &e)
		if e.Data.Status == "ACTIVE" && e.Data.Data.UsedBytes == used {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live eSIM is %s with %d bytes used after a minute, want ACTIVE with %d", e.Data.Status, e.Data.Data.UsedBytes, used)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// install has the simulator install the profile iccid on a device, and
// returns what ordering answered its two notifications (download,
// installation): "" for each it accepted.
func install(t *testing.T, p *Platform, iccid string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.URL(SMDPSim)+"/control/profiles/"+iccid+"/install", nil)
	req.Header.Set("Authorization", "Bearer "+p.Secret(SMDPSim, "CONTROL_TOKEN"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Notifications []struct {
			Sent  bool   `json:"sent"`
			Error string `json:"error"`
		} `json:"notifications"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusOK || len(res.Notifications) != 2 {
		t.Fatalf("install: %d %+v %v", resp.StatusCode, res, err)
	}
	var out []string
	for _, n := range res.Notifications {
		if !n.Sent {
			t.Fatalf("the simulator told no one of the install: %+v", res)
		}
		out = append(out, n.Error)
	}
	return out
}

// portalSignIn posts the portal's sign-in form, as a browser on the
// portal's own page does, and returns the status (303 when signed in).
func portalSignIn(t *testing.T, portal, email, password string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, portal+"/signin", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSON(t *testing.T, url, key string, v any) {
	t.Helper()
	resp := get(t, url, key)
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}

func status(t *testing.T, url, key string) int {
	t.Helper()
	resp := get(t, url, key)
	resp.Body.Close()
	return resp.StatusCode
}

// get sends GET url with key as the bearer; the caller closes the body.
func get(t *testing.T, url, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

func wantStatus(t *testing.T, url, key string, want int) {
	t.Helper()
	if got := status(t, url, key); got != want {
		t.Errorf("GET %s with key %.14s...: %d, want %d", url, key, got, want)
	}
}
