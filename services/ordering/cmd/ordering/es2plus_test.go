package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// listening reads the service's log lines and reports each listener's
// address by what it serves ("" for HTTP_ADDR).
func listening() (io.WriteCloser, <-chan [2]string) {
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

// With ES2PLUS_ADDR the program serves the SM-DP+'s notifications on a
// port of its own, over mutual TLS: an SM-DP+ with a certificate of the
// CA is answered (here Failed: no live eSIM has the ICCID), a client
// without one is refused at the handshake.
func TestRunServesTheES2PlusListener(t *testing.T) {
	certs, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw, found := listening()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"ordering"}, env(map[string]string{
			"DATABASE_URL": pgtest.NewDatabase(t),
			"HTTP_ADDR":    "127.0.0.1:0", "ES2PLUS_ADDR": "127.0.0.1:0",
			"ES2PLUS_CERT_FILE": certs.ServerCert, "ES2PLUS_KEY_FILE": certs.ServerKey, "ES2PLUS_CLIENT_CA_FILE": certs.CACert,
		}), logw)
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
		case <-time.After(60 * time.Second):
			t.Fatal("no listeners within 60 s")
		}
	}
	url := "https://" + addrs["es2plus"] + "/gsma/rsp2/es2plus/handleDownloadProgressInfo"
	body := `{"header":{"functionRequesterIdentifier":"smdp","functionCallIdentifier":"c1"},"iccid":"8988000000000000008","profileType":"t",` +
		`"timestamp":"2026-11-29T10:00:00Z","notificationPointId":4,"notificationPointStatus":{"status":"Executed-Success"}}`
	post := func(cfg *tls.Config) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
		return (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}).Do(req)
	}
	smdp, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := post(smdp)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"status":"Failed"`) || !strings.Contains(string(raw), `"subjectCode":"8.2.1","reasonCode":"3.9"`) {
		t.Errorf("a notification of an unknown ICCID: %d %s", resp.StatusCode, raw)
	}
	if resp, err := post(&tls.Config{RootCAs: smdp.RootCAs, MinVersion: tls.VersionTLS12}); err == nil {
		resp.Body.Close()
		t.Errorf("without a client certificate: %d, want a refused handshake", resp.StatusCode)
	}
	if code, _ := httpservertest.Get(t, "http://"+addrs[""]+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz: %d", code)
	}
	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
}
