package devcerts_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
)

func contents(t *testing.T, f devcerts.Files) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range []string{f.CACert, filepath.Join(f.Dir, "ca.key"), f.ServerCert, f.ServerKey, f.ClientCert, f.ClientKey} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = data
	}
	return out
}

func TestEnsureKeepsValidFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	first, err := devcerts.Ensure(dir, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(first.CACert) || filepath.Dir(first.ServerKey) != first.Dir {
		t.Fatalf("paths not absolute in Dir: %+v", first)
	}
	st, err := os.Stat(first.Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v; want 0700", st.Mode().Perm(), err)
	}
	for _, key := range []string{first.ServerKey, first.ClientKey, filepath.Join(first.Dir, "ca.key")} {
		if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, %v; want 0600", key, st.Mode().Perm(), err)
		}
	}
	before := contents(t, first)

	// A subset of the hosts is covered too.
	second, err := devcerts.Ensure(dir, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatalf("Files changed: %+v vs %+v", second, first)
	}
	for p, data := range contents(t, second) {
		if !bytes.Equal(data, before[p]) {
			t.Errorf("%s rewritten though valid", p)
		}
	}
}

func TestEnsureRegeneratesForANewHost(t *testing.T) {
	dir := t.TempDir()
	f, err := devcerts.Ensure(dir, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	before := contents(t, f)
	if _, err := devcerts.Ensure(dir, "localhost", "smdp-sim"); err != nil {
		t.Fatal(err)
	}
	after := contents(t, f)
	for p := range before {
		if bytes.Equal(before[p], after[p]) {
			t.Errorf("%s kept though the server certificate lacked a host", p)
		}
	}
	handshake(t, f, f, "smdp-sim")
}

func TestEnsureRegeneratesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := devcerts.Ensure(dir, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.ServerCert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := devcerts.Ensure(dir, "localhost"); err != nil {
		t.Fatal(err)
	}
	handshake(t, f, f, "localhost")
}

// handshake runs a TLS handshake over loopback and returns the client's
// and the server's errors.
func handshakeErr(t *testing.T, server devcerts.Files, client *tls.Config, name string) (clientErr, serverErr error) {
	t.Helper()
	srvTLS, err := server.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverDone := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			serverDone <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.(*tls.Conn).Handshake(); err != nil {
			serverDone <- err
			return
		}
		_, err = io.WriteString(conn, "ok")
		serverDone <- err
	}()
	cfg := client.Clone()
	cfg.ServerName = name
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", port), cfg)
	if err == nil {
		defer conn.Close()
		// With TLS 1.3 the server's verdict on the client certificate
		// arrives after the client's handshake: read to see it.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		_, err = io.ReadFull(conn, buf)
	}
	return err, <-serverDone
}

func handshake(t *testing.T, server, client devcerts.Files, name string) {
	t.Helper()
	cfg, err := client.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if cerr, serr := handshakeErr(t, server, cfg, name); cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
}

func TestMutualTLS(t *testing.T) {
	f, err := devcerts.Generate(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devcerts.Generate(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("trusted client", func(t *testing.T) {
		handshake(t, f, f, "127.0.0.1")
		handshake(t, f, f, "localhost")
	})
	t.Run("client without a certificate", func(t *testing.T) {
		cfg, err := f.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = nil
		if cerr, serr := handshakeErr(t, f, cfg, "localhost"); cerr == nil || serr == nil {
			t.Fatalf("a client without a certificate got through: client %v, server %v", cerr, serr)
		}
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		cfg, err := other.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		good, _ := f.ClientTLS()
		cfg.RootCAs = good.RootCAs // it trusts the server; the server must not trust it
		if cerr, serr := handshakeErr(t, f, cfg, "localhost"); cerr == nil || serr == nil {
			t.Fatalf("a foreign client certificate got through: client %v, server %v", cerr, serr)
		}
	})
	t.Run("server of another CA", func(t *testing.T) {
		cfg, err := f.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		if cerr, _ := handshakeErr(t, other, cfg, "localhost"); cerr == nil {
			t.Fatal("the client trusted a server of another CA")
		}
	})
}

func TestGenerateAlwaysMakesAFreshCA(t *testing.T) {
	dir := t.TempDir()
	f, err := devcerts.Generate(dir, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	before := contents(t, f)
	if _, err := devcerts.Generate(dir, "localhost"); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before[f.CACert], contents(t, f)[f.CACert]) {
		t.Fatal("Generate kept the CA")
	}
}
