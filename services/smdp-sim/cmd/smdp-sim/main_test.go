package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
)

// listening reads the service's log lines and reports each listener's
// address by what it serves ("" for HTTP_ADDR).
func listening(t *testing.T) (io.WriteCloser, <-chan [2]string) {
	r, w := io.Pipe()
	found := make(chan [2]string, 4)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var line struct{ Msg, Addr, Serving string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				found <- [2]string{line.Serving, line.Addr}
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return w, found
}

func TestRunServesBothUntilCancelled(t *testing.T) {
	certs, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "ES2PLUS_ADDR": "127.0.0.1:0",
		"TLS_CERT_FILE": certs.ServerCert, "TLS_KEY_FILE": certs.ServerKey, "CLIENT_CA_FILE": certs.CACert,
		"PROFILE_TYPES": "esim-travel:5", "CONTROL_API": "true", "CONTROL_TOKEN": controlToken,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw, found := listening(t)
	var logs bytes.Buffer // written by run alone, read once it has returned
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"smdp-sim"}, func(k string) string { return env[k] }, io.MultiWriter(logw, &logs))
		_ = logw.Close()
		done <- err
	}()
	addrs := map[string]string{}
	for len(addrs) < 2 {
		select {
		case l := <-found:
			addrs[l[0]] = l[1]
		case err := <-done:
			t.Fatalf("run returned before listening: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no listeners within 30 s")
		}
	}
	if status, _ := httpservertest.Get(t, "http://"+addrs[""]+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz: %d", status)
	}

	tlsCfg, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
	body := `{"header":{"functionRequesterIdentifier":"esim-ordering","functionCallIdentifier":"c1"},"profileType":"esim-travel"}`
	req, _ := http.NewRequest(http.MethodPost, "https://"+addrs["es2plus"]+"/gsma/rsp2/es2plus/downloadOrder", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte("Executed-Success")) {
		t.Fatalf("downloadOrder: %d %s", resp.StatusCode, answer)
	}
	if status, _ := httpservertest.Get(t, "http://"+addrs[""]+"/control/state"); status != http.StatusUnauthorized {
		t.Fatalf("control state without the token: %d", status)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://"+addrs[""]+"/control/state", nil)
	req.Header.Set("Authorization", "Bearer "+controlToken)
	if status, state := httpservertest.Do(t, req); status != http.StatusOK || !strings.Contains(state, `"allocated":1`) {
		t.Fatalf("control state: %d %s", status, state)
	}

	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
	if strings.Contains(logs.String(), controlToken) {
		t.Error("the log holds CONTROL_TOKEN")
	}
}

const controlToken = "a-control-token-of-at-least-32-bytes-0123456789"

func TestRunRejectsBadStarts(t *testing.T) {
	certs, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// with is a configuration that starts, but for vars.
	with := func(vars map[string]string) map[string]string {
		all := map[string]string{"TLS_CERT_FILE": certs.ServerCert, "TLS_KEY_FILE": certs.ServerKey, "CLIENT_CA_FILE": certs.CACert}
		for k, v := range vars {
			all[k] = v
		}
		return all
	}
	operator := func(vars map[string]string) map[string]string {
		all := with(map[string]string{"OPERATOR_URL": "https://ordering:8443", "OPERATOR_CERT_FILE": certs.ClientCert, "OPERATOR_KEY_FILE": certs.ClientKey, "OPERATOR_CA_FILE": certs.CACert})
		for k, v := range vars {
			all[k] = v
		}
		return all
	}
	for name, tc := range map[string]struct {
		vars map[string]string
		want string
	}{
		"no certificates": {nil, "TLS_CERT_FILE is required"},
		"bad pools":       {map[string]string{"TLS_CERT_FILE": "x", "TLS_KEY_FILE": "x", "CLIENT_CA_FILE": "x", "PROFILE_TYPES": "a:0"}, "PROFILE_TYPES"},
		"missing files":   {map[string]string{"TLS_CERT_FILE": "/nonexistent", "TLS_KEY_FILE": "x", "CLIENT_CA_FILE": "x"}, "TLS_CERT_FILE"},
		"control API without a token": {map[string]string{"TLS_CERT_FILE": "x", "TLS_KEY_FILE": "x", "CLIENT_CA_FILE": "x", "CONTROL_API": "true"},
			"CONTROL_TOKEN: 0 bytes; CONTROL_API=true requires at least 32"},
		"control API with a short token": {map[string]string{"TLS_CERT_FILE": "x", "TLS_KEY_FILE": "x", "CLIENT_CA_FILE": "x", "CONTROL_API": "true", "CONTROL_TOKEN": "short"},
			"CONTROL_TOKEN: 5 bytes"},
		"operator files without a URL":  {with(map[string]string{"OPERATOR_CA_FILE": "/ca.crt"}), "OPERATOR_CA_FILE is set but OPERATOR_URL is not"},
		"an http operator":              {operator(map[string]string{"OPERATOR_URL": "http://ordering:8443"}), `OPERATOR_URL "http://ordering:8443": want an https:// URL`},
		"an operator without its files": {operator(map[string]string{"OPERATOR_KEY_FILE": ""}), "OPERATOR_KEY_FILE: required with OPERATOR_URL"},
		"an operator timeout of 0":      {operator(map[string]string{"OPERATOR_TIMEOUT": "0s"}), "OPERATOR_TIMEOUT 0s"},
		"no requester identifier":       {operator(map[string]string{"OPERATOR_REQUESTER_ID": strings.Repeat("x", 65)}), "OPERATOR_REQUESTER_ID"},
		"an unreadable operator key":    {operator(map[string]string{"OPERATOR_KEY_FILE": "/nonexistent/client.key"}), "/nonexistent/client.key"},
		"an operator CA that is no PEM": {operator(map[string]string{"OPERATOR_CA_FILE": certs.ClientKey}), "no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), []string{"smdp-sim"}, func(k string) string { return tc.vars[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
