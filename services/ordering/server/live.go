package server

import (
	"fmt"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
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
