// Package mtls loads the TLS configurations of mutual TLS from PEM files:
// a client that presents its certificate and trusts only servers a CA
// signed, and a server that admits only clients a CA signed. Errors name
// the files, never what a key holds.
package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Client is a client's configuration: its certificate and key, and the
// CAs of the servers it trusts.
func Client(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := keyPair("client", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	roots, err := pool(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// Server is a server's configuration: its certificate and key, and only
// clients with a certificate one of clientCAFile's CAs signed get through
// the handshake.
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := keyPair("server", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	clients, err := pool(clientCAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

func keyPair(side, certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s certificate: %w", side, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s key: %w", side, err)
	}
	// tls.X509KeyPair's errors describe the PEM blocks, never the key.
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s certificate %s and key %s: %w", side, certFile, keyFile, err)
	}
	return cert, nil
}

func pool(caFile string) (*x509.CertPool, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA %s: no PEM certificate in it", caFile)
	}
	return p, nil
}
