package es2plus

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/esimplatform/esim/libs/devcerts"
)

// pki is the certificates of one test, from a development CA that signs
// the SM-DP+'s and the client's, and the files of a client Config.
type pki struct {
	files             devcerts.Files
	server            *tls.Config
	certFile, keyFile string
	caFile            string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	f := otherCA(t)
	server, err := f.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	return &pki{files: f, server: server, certFile: f.ClientCert, keyFile: f.ClientKey, caFile: f.CACert}
}

// otherCA is another development CA, with its certificates: one the
// other side does not trust.
func otherCA(t *testing.T) devcerts.Files {
	t.Helper()
	f, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serverTLS requires and verifies client certificates of the CA, as an
// SM-DP+ does.
func (p *pki) serverTLS() *tls.Config { return p.server.Clone() }

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
