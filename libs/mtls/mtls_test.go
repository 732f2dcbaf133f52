package mtls_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/mtls"
)

// A client of Client's reaches a server of Server's; a client without a
// certificate is refused at the handshake, and bad files are named.
func TestMutualTLS(t *testing.T) {
	certs, err := devcerts.Ensure(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := mtls.Server(certs.ServerCert, certs.ServerKey, certs.CACert)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	ts.TLS = server
	ts.StartTLS()
	defer ts.Close()

	client, err := mtls.Client(certs.ClientCert, certs.ClientKey, certs.CACert)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: client}}).Get(ts.URL)
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	res.Body.Close()

	anonymous := client.Clone()
	anonymous.Certificates = nil
	if _, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: anonymous}}).Get(ts.URL); err == nil {
		t.Error("a client without a certificate got through")
	}

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, load := range map[string]func() (*tls.Config, error){
		"a CA with no certificate": func() (*tls.Config, error) { return mtls.Client(certs.ClientCert, certs.ClientKey, notPEM) },
		"a key of another pair":    func() (*tls.Config, error) { return mtls.Server(certs.ServerCert, certs.ClientKey, certs.CACert) },
		"a missing certificate":    func() (*tls.Config, error) { return mtls.Client(notPEM+".missing", certs.ClientKey, certs.CACert) },
	} {
		_, err := load()
		if err == nil || strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
