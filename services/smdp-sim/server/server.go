// Package server assembles the SM-DP+ simulator: the Sim, the ES2+
// handler with its TLS configuration, and the plain HTTP handler with the
// probes and, when enabled, the control API.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/control"
	"github.com/esimplatform/esim/services/smdp-sim/es2plus"
	"github.com/esimplatform/esim/services/smdp-sim/network"
)

// Server is an assembled simulator: serve Handler on HTTP_ADDR and
// ES2PlusHandler with TLSConfig on ES2PLUS_ADDR (Listeners), then Close.
type Server struct {
	sim         *smdpsim.Sim
	handler     http.Handler
	es2plus     http.Handler
	es2plusAddr string
	tls         *tls.Config
}

// New builds the simulator with full pools and loads its certificates.
func New(_ context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("smdp-sim server: telemetry is required")
	}
	pools, err := smdpsim.ParsePools(cfg.ProfileTypes)
	if err != nil {
		return nil, fmt.Errorf("PROFILE_TYPES: %w", err)
	}
	sim, err := smdpsim.New(smdpsim.Config{SMDPAddress: cfg.SMDPAddress, Pools: pools})
	if err != nil {
		return nil, err
	}
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Operator.URL != "" {
		n, err := es2plus.NewNotifier(es2plus.NotifierConfig{
			URL: cfg.Operator.URL, CertFile: cfg.Operator.CertFile, KeyFile: cfg.Operator.KeyFile, CAFile: cfg.Operator.CAFile,
			RequesterID: cfg.Operator.RequesterID, Timeout: cfg.Operator.Timeout,
		})
		if err != nil {
			return nil, fmt.Errorf("OPERATOR_*: %w", err)
		}
		sim.SetNotifier(n)
	}
	app := http.NotFoundHandler()
	if cfg.ControlAPI {
		app = control.Handler(sim, cfg.ControlToken.Reveal())
	}
	return &Server{
		sim:         sim,
		tls:         tlsConfig,
		es2plusAddr: cfg.ES2PlusAddr,
		handler: httpserver.Handler(httpserver.Routes{
			App:       app,
			Telemetry: tel,
		}),
		es2plus: httpserver.Handler(httpserver.Routes{
			App:       es2plusAndNetwork(es2plus.Handler(sim, tel.Logger), network.Handler(sim, tel.Logger)),
			Telemetry: tel,
			// Mutual TLS decides who may call, as at a real SM-DP+,
			// whatever name the caller used.
			Public:       true,
			MaxBodyBytes: es2plus.MaxBodyBytes,
		}),
	}, nil
}

// es2plusAndNetwork serves the network API beside ES2+ on the mutual TLS
// port: the operator's certificate is its credential for both.
func es2plusAndNetwork(es2 http.Handler, net http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if network.IsNetworkPath(r.URL.Path) {
			net.ServeHTTP(w, r)
			return
		}
		es2.ServeHTTP(w, r)
	})
}

func loadTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS_CERT_FILE %s and TLS_KEY_FILE %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	caPEM, err := os.ReadFile(cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("CLIENT_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CLIENT_CA_FILE %s: no PEM certificate in it", cfg.ClientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Sim is the simulator itself, for in-process tests.
func (s *Server) Sim() *smdpsim.Sim { return s.sim }

// Handler serves /healthz, /readyz and, with CONTROL_API, /control/;
// /metrics is httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// ES2PlusHandler serves the ES2+ functions; serve it with TLSConfig.
func (s *Server) ES2PlusHandler() http.Handler { return s.es2plus }

// TLSConfig is the ES2+ listener's: only callers with a certificate of
// CLIENT_CA_FILE get through the handshake.
func (s *Server) TLSConfig() *tls.Config { return s.tls.Clone() }

// Listeners is the ES2+ port, which libs/service serves beside the plain
// one: the simulator is of no use without it.
func (s *Server) Listeners() []service.Listener {
	return []service.Listener{{Name: "es2plus", Setting: "ES2PLUS_ADDR", Addr: s.es2plusAddr, TLS: s.TLSConfig(), Handler: s.es2plus}}
}

// Stopping ends hanging calls as the shutdown begins rather than holding
// the drain for its whole grace period.
func (s *Server) Stopping() { s.sim.Close() }

// Close ends hanging calls, so a shutdown need not wait for them; it may
// be called more than once.
func (s *Server) Close() { s.sim.Close() }
