package platform

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esimplatform/esim/cmd/internal/loopbacktest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

func TestPreflightNamesEachMissingDependencyAndHowToStartIt(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	_, err = Start(context.Background(), Options{
		PGURL:         "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		RedisURL:      "redis://127.0.0.1:1/0",
		GatewayAddr:   busy.Addr().String(),
		AccountsAddr:  loopbacktest.FreeAddr(t),
		CatalogueAddr: loopbacktest.FreeAddr(t),
		BinDir:        t.TempDir(),
		RunDir:        t.TempDir(),
	})
	if err == nil {
		t.Fatal("Start succeeded without Postgres and Redis")
	}
	msg := err.Error()
	for _, want := range []string{
		"Postgres is not answering at postgres://postgres:xxxxx@127.0.0.1:1/postgres", "PG_URL", "pg_ctlcluster --skip-systemctl-redirect",
		"Redis is not answering at redis://127.0.0.1:1/0", "REDIS_URL", "redis-server --daemonize yes",
		"gateway address " + busy.Addr().String() + " is not free",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("preflight error leaks the password:\n%s", msg)
	}
}

func TestStartReportsTheLogOfAServiceThatDies(t *testing.T) {
	bin := t.TempDir()
	// Stand-ins that behave like a service failing at start (accounts) and
	// like services that never become ready: what Start must explain.
	scripts := map[string]string{
		Accounts:  "#!/bin/sh\necho 'config: DATABASE_URL is broken' >&2\nexit 3\n",
		Catalogue: "#!/bin/sh\nexec sleep 60\n",
		Gateway:   "#!/bin/sh\nexec sleep 60\n",
	}
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := Start(context.Background(), Options{
		GatewayAddr: loopbacktest.FreeAddr(t), AccountsAddr: loopbacktest.FreeAddr(t), CatalogueAddr: loopbacktest.FreeAddr(t),
		BinDir: bin, RunDir: t.TempDir(), ReadyTimeout: 3 * time.Second, StopGrace: time.Second,
	})
	if err == nil {
		t.Fatal("Start succeeded with a dying accounts service")
	}
	for _, want := range []string{"accounts exited during start", "exit status 3", "config: DATABASE_URL is broken",
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
	bin := t.TempDir()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{Accounts, Catalogue, Gateway} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, svc), "./services/"+svc+"/cmd/"+svc)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", svc, err, out)
		}
	}
	opts := Options{
		GatewayAddr: loopbacktest.FreeAddr(t), AccountsAddr: loopbacktest.FreeAddr(t), CatalogueAddr: loopbacktest.FreeAddr(t),
		BinDir: bin, RunDir: t.TempDir(), KeyName: "platform test",
		// Databases of its own: a developer's `make run` data stays untouched.
		DatabasePrefix: pgtest.DatabasePrefix(t, "accounts", "catalogue"),
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
		if err := second.RevokeSandboxKey(ctx); err != nil {
			t.Error(err)
		}
		if err := second.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if second.SandboxKey == first.SandboxKey || second.DemoAccountID != first.DemoAccountID {
		t.Fatalf("second start: account %s key %s", second.DemoAccountID, second.SandboxKey)
	}
	wantStatus(t, second.APIBaseURL+"/plans?limit=1", second.SandboxKey, http.StatusOK)
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

func status(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func wantStatus(t *testing.T, url, key string, want int) {
	t.Helper()
	if got := status(t, url, key); got != want {
		t.Errorf("GET %s with key %.14s...: %d, want %d", url, key, got, want)
	}
}
