package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/cmd/internal/platform/redistest"
	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

func TestRejectsStrayArguments(t *testing.T) {
	err := run(context.Background(), []string{"now"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unexpected arguments ["now"]`) {
		t.Fatalf("err = %v", err)
	}
}

// TestRunPrintsAWorkingKeyAndStopsCleanly is `make run` end to end: the
// printed key works against the printed API URL, and cancelling (Ctrl-C)
// makes run return nil after stopping everything.
func TestRunPrintsAWorkingKeyAndStopsCleanly(t *testing.T) {
	bin := t.TempDir()
	declared := servicestest.Build(t, bin, "./cmd/esimctl")
	addrs := servicestest.FreeAddrs(t, declared)
	gateway := addrs[platform.Gateway]
	// Its own key name, so a developer's running `make run` key survives;
	// its own token file, so a developer's esimctl keeps theirs.
	const keyName = "platform main test"
	tokenFile := filepath.Join(t.TempDir(), "operator-token")
	runDir := t.TempDir()
	args := []string{"-key-name", keyName, "-bin-dir", bin, "-run-dir", runDir, "-operator-token-file", tokenFile,
		"-db-prefix", pgtest.DatabasePrefix(t, servicestest.Databases(declared)...), "-pg-url", pgtest.AdminURL(), "-redis-url", redistest.URL()}
	for name, addr := range addrs {
		args = append(args, "-addr", name+"="+addr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, w)
		w.Close()
	}()

	var key, liveKey, printed, operatorCLI string
	lines := bufio.NewScanner(out)
	deadline := time.AfterFunc(90*time.Second, func() { out.CloseWithError(io.ErrUnexpectedEOF) })
	for lines.Scan() {
		printed += lines.Text() + "\n"
		if k, ok := strings.CutPrefix(lines.Text(), "sandbox key: "); ok {
			key = k
		}
		if k, ok := strings.CutPrefix(lines.Text(), "live key: "); ok {
			liveKey = k
		}
		if c, ok := strings.CutPrefix(lines.Text(), "Operator CLI: "); ok {
			operatorCLI = c
		}
		if strings.HasPrefix(lines.Text(), "Press Ctrl-C") {
			break
		}
	}
	deadline.Stop()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if !strings.HasPrefix(key, "sk_sandbox_") {
		// Why run stopped, and what the services said, so that a
		// failure here can be understood from the test's output alone.
		var runErr error
		select {
		case runErr = <-done:
		case <-time.After(30 * time.Second):
			runErr = errors.New("run has not returned after 30 s")
		}
		logs, _ := filepath.Glob(filepath.Join(runDir, "logs", "*.log"))
		var tails strings.Builder
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&tails, "--- %s (last 2000 bytes)\n%s\n", filepath.Base(l), b[max(0, len(b)-2000):])
		}
		t.Fatalf("no `sandbox key: sk_sandbox_...` line in:\n%s\nrun: %v\n%s", printed, runErr, tails.String())
	}
	if !strings.HasPrefix(liveKey, "sk_live_") {
		t.Errorf("no `live key: sk_live_...` line in:\n%s", printed)
	}
	api := "http://" + gateway + "/v1"
	for _, want := range []string{api, api + "/openapi.json", "curl -s -H 'Authorization: Bearer " + key + "'", "logs/<service>.log",
		" http://" + addrs[platform.SMDPSim] + "/control/state",
		"portal: http://" + addrs[platform.Portal] + " (sign in as " + platform.DemoPortalEmail + ", password "} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}

	// The control API's curl line works as printed, with this start's
	// token.
	m := regexp.MustCompile(`curl -s -H 'Authorization: Bearer ([^']+)' (http://\S+/control/state)`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("no control API curl line with a token in:\n%s", printed)
	}
	req, _ := http.NewRequest(http.MethodGet, m[2], nil)
	req.Header.Set("Authorization", "Bearer "+m[1])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the printed control API curl: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	req, _ = http.NewRequest(http.MethodGet, api+"/plans?country=JP&limit=3", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/plans with the printed key: %s", resp.Status)
	}

	// The esimctl command the summary suggests works as printed, on these
	// addresses rather than the defaults, with no ESIM_* variable set.
	hint := strings.Fields(operatorCLI)
	if len(hint) == 0 || hint[0] != "./bin/esimctl" {
		t.Fatalf("no `Operator CLI: ./bin/esimctl ...` line in:\n%s", printed)
	}
	cli := exec.Command(filepath.Join(bin, "esimctl"), hint[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ESIM_") {
			cli.Env = append(cli.Env, kv)
		}
	}
	if got, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(got), platform.DemoAccountID) {
		t.Errorf("the suggested %q: %v\n%s", operatorCLI, err, got)
	}

	// Leave no working test key behind in the shared demo account.
	token, err := operator.ReadToken(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	client := accountsv1.NewAccountsProtobufClient("http://"+addrs[platform.Accounts], internalauth.Client(http.DefaultClient, token))
	keys, err := client.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: platform.DemoAccountID})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys.GetKeys() {
		if k.GetName() == keyName && k.GetRevokedAt() == nil {
			if _, err := client.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: platform.DemoAccountID, KeyId: k.GetId()}); err != nil {
				t.Errorf("revoke test key: %v", err)
			}
		}
	}

	cancel() // Ctrl-C
	httpservertest.Returned(t, done, 30*time.Second)
	if _, err := http.Get("http://" + gateway + "/healthz"); err == nil {
		t.Error("the gateway still answers after run returned")
	}
}
