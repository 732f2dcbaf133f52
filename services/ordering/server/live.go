package server

import (
	"crypto/tls"
	"fmt"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/network"
	"github.com/esimplatform/esim/services/ordering/postgres"
)

// newSMDPClient returns the client of the SM-DP+ of live orders, or nil
// when none is configured. The certificates are read here, at start and
// before anything else: a missing or unreadable file stops the service
// with its name rather than failing every live order.
func newSMDPClient(cfg SMDPConfig, tel *telemetry.Telemetry) (*es2plus.Client, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	client, err := es2plus.New(es2plus.Config{
		URL: cfg.URL, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CAFile: cfg.CAFile,
		Timeout: cfg.Timeout, RequesterID: cfg.RequesterID, ProtocolVersion: cfg.AdminProtocol,
	}, es2plus.WithTracerProvider(tel.TracerProvider), es2plus.WithMeterProvider(tel.MeterProvider),
		es2plus.WithLogger(tel.Logger.With("provider", "es2plus")))
	if err != nil {
		return nil, fmt.Errorf("SM-DP+ client: %w", err)
	}
	return client, nil
}

// newLiveProvider returns the ES2+ provider over client, nil without one.
func newLiveProvider(cfg SMDPConfig, client *es2plus.Client, store *postgres.Store, tel *telemetry.Telemetry) (*es2plus.Provider, error) {
	if client == nil {
		return nil, nil
	}
	types, err := es2plus.ParseProfileTypes(cfg.ProfileTypes)
	if err != nil {
		return nil, fmt.Errorf("SMDP_PROFILE_TYPES: %w", err)
	}
	codes, err := cfg.confirmationCodes()
	if err != nil {
		return nil, fmt.Errorf("SMDP_CONFIRMATION_CODES: %w", err)
	}
	records := func(tx ordering.Locked) es2plus.Store { return store.Records(tx) }
	return es2plus.NewProvider(client, records, types, tel.Logger.With("provider", "es2plus"), es2plus.Settings{
		RetryBackoff: cfg.CancelInterval, CancelBudget: cfg.CancelBudget,
		SMDPAddress: cfg.address(), ConfirmationCodes: codes,
	}), nil
}

// newNetworkClient returns the client of the live eSIMs' network, or nil
// when none is configured; like the SM-DP+'s, its certificates are read
// at start.
func newNetworkClient(cfg NetworkConfig) (*network.Client, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	client, err := network.New(network.Config{URL: cfg.URL, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CAFile: cfg.CAFile, Timeout: cfg.Timeout})
	if err != nil {
		return nil, fmt.Errorf("network client: %w", err)
	}
	return client, nil
}

// es2plusTLS is the TLS of the listener of the SM-DP+'s notifications,
// nil without ES2PLUS_ADDR. Its certificates are read at start too.
func es2plusTLS(cfg ES2PlusConfig) (*tls.Config, error) {
	if cfg.Addr == "" {
		return nil, nil
	}
	tlsConfig, err := es2plus.ServerTLS(cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("ES2+ listener: %w", err)
	}
	return tlsConfig, nil
}

// es2plusListener is the listener of the SM-DP+'s notifications, none
// without its TLS.
func es2plusListener(cfg ES2PlusConfig, tlsConfig *tls.Config, svc es2plus.ProgressHandler, tel *telemetry.Telemetry) []service.Listener {
	if tlsConfig == nil {
		return nil
	}
	return []service.Listener{{
		Name: "es2plus", Setting: "ES2PLUS_ADDR", Addr: cfg.Addr, TLS: tlsConfig,
		Handler: httpserver.Handler(httpserver.Routes{
			App:       es2plus.NotificationHandler(svc, tel.Logger),
			Telemetry: tel,
			// Mutual TLS decides who may call, whatever name the SM-DP+
			// used.
			Public:       true,
			MaxBodyBytes: es2plus.MaxNotificationBytes,
		}),
	}}
}
