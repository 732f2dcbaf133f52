// Package devcerts makes and keeps a development PKI for mutual TLS: a CA,
// a server certificate and a client certificate, as PEM files in one
// directory. `make run`, tests and the SM-DP+ simulator use it; nothing in
// production does.
package devcerts

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/esimplatform/esim/libs/mtls"
)

// ClientCommonName is the subject of the client certificate: the service
// that calls the SM-DP+.
const ClientCommonName = "esim-ordering"

const (
	validity = 365 * 24 * time.Hour
	// renewBefore makes Ensure replace certificates that would expire
	// during a long-running dev session rather than in the middle of it.
	renewBefore = 30 * 24 * time.Hour
	// lockWait bounds how long Ensure waits for another process making the
	// same files (make run starts several at once); lockStale is when a
	// lock left by a killed process is taken over.
	lockWait  = 15 * time.Second
	lockStale = 30 * time.Second
)

// Files are the absolute paths of the PEM files in Dir.
type Files struct {
	Dir        string
	CACert     string
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

func filesIn(dir string) (Files, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Files{}, fmt.Errorf("devcerts: %w", err)
	}
	return Files{
		Dir:        abs,
		CACert:     filepath.Join(abs, "ca.crt"),
		ServerCert: filepath.Join(abs, "server.crt"),
		ServerKey:  filepath.Join(abs, "server.key"),
		ClientCert: filepath.Join(abs, "client.crt"),
		ClientKey:  filepath.Join(abs, "client.key"),
	}, nil
}

func (f Files) caKey() string { return filepath.Join(f.Dir, "ca.key") }

// Ensure returns the PKI in dir, making it first when it is missing,
// broken, expiring within 30 days or without a SAN for one of hosts. A PKI
// that is kept stays byte-identical, so certificates already loaded or
// handed to another process stay trusted. hosts default to localhost and
// 127.0.0.1.
func Ensure(dir string, hosts ...string) (Files, error) {
	return provide(dir, false, hosts)
}

// Generate always makes a fresh PKI in dir, replacing what is there; a
// second Generate'd directory is a CA the first one does not trust.
func Generate(dir string, hosts ...string) (Files, error) {
	return provide(dir, true, hosts)
}

func provide(dir string, fresh bool, hosts []string) (Files, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	f, err := filesIn(dir)
	if err != nil {
		return Files{}, err
	}
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("devcerts: %w", err)
	}
	unlock, err := lock(f.Dir)
	if err != nil {
		return Files{}, err
	}
	defer unlock()
	// Checked under the lock: another process may just have made them.
	if !fresh && f.valid(hosts, time.Now()) == nil {
		return f, nil
	}
	if err := f.generate(hosts); err != nil {
		return Files{}, fmt.Errorf("devcerts: %w", err)
	}
	return f, nil
}

// lock keeps two processes from interleaving the files of two PKIs, which
// would leave a server certificate its CA file does not sign.
func lock(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, ".lock")
	deadline := time.Now().Add(lockWait)
	for {
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = fh.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("devcerts: lock: %w", err)
		}
		if st, serr := os.Stat(path); serr == nil && time.Since(st.ModTime()) > lockStale {
			_ = os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("devcerts: %s is held by another process for more than %s; remove it if none is running", path, lockWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// valid reports why the files in f cannot be kept, or nil.
func (f Files) valid(hosts []string, now time.Time) error {
	ca, err := readCert(f.CACert)
	if err != nil {
		return err
	}
	if _, err := readKey(f.caKey()); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if ca.NotAfter.Before(now.Add(renewBefore)) {
		return errors.New("CA expires soon")
	}
	for _, leaf := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{{f.ServerCert, f.ServerKey, x509.ExtKeyUsageServerAuth}, {f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth}} {
		pair, err := tls.LoadX509KeyPair(leaf.cert, leaf.key)
		if err != nil {
			return err
		}
		cert := pair.Leaf
		if cert.NotAfter.Before(now.Add(renewBefore)) {
			return fmt.Errorf("%s expires soon", leaf.cert)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{leaf.usage}}); err != nil {
			return err
		}
		if leaf.usage == x509.ExtKeyUsageServerAuth {
			for _, h := range hosts {
				if err := cert.VerifyHostname(h); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PEM private key", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ec, nil
}

func (f Files) generate(hosts []string) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "esim development CA", Organization: []string{"esim development"}},
		NotBefore:             now.Add(-time.Hour), // tolerate a little clock skew between containers
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}

	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientCommonName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}

	// The CA first: a reader that sees the new leaves sees their CA too.
	if err := writePEM(f.caKey(), "PRIVATE KEY", mustPKCS8(caKey), 0o600); err != nil {
		return err
	}
	if err := writePEM(f.CACert, "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	for _, leaf := range []struct {
		tmpl      *x509.Certificate
		cert, key string
	}{{server, f.ServerCert, f.ServerKey}, {client, f.ClientCert, f.ClientKey}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := sign(leaf.tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(leaf.key, "PRIVATE KEY", mustPKCS8(key), 0o600); err != nil {
			return err
		}
		if err := writePEM(leaf.cert, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func mustPKCS8(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // only fails for key types it does not know
	}
	return der
}

// writePEM writes through a temporary file and a rename, so a process
// reading the file meanwhile sees the old one or the new one, never half.
func writePEM(path, typ string, der []byte, perm os.FileMode) error {
	var buf bytes.Buffer
	if err := pem.Encode(&buf, &pem.Block{Type: typ, Bytes: der}); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ServerTLS is the server side of mutual TLS: the server certificate, and
// only clients with a certificate the CA signed.
func (f Files) ServerTLS() (*tls.Config, error) {
	return mtls.Server(f.ServerCert, f.ServerKey, f.CACert)
}

// ClientTLS is the client side: the client certificate, and only servers
// the CA signed.
func (f Files) ClientTLS() (*tls.Config, error) {
	return mtls.Client(f.ClientCert, f.ClientKey, f.CACert)
}
