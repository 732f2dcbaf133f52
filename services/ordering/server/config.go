package server

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	orderingpostgres "github.com/esimplatform/esim/services/ordering/postgres"
)

// Config is everything the ordering service reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// AllowedHosts are names the service answers to besides loopback, IP
	// addresses and cluster names (httpserver.InternalHost): a DNS name
	// of its own, when it has one.
	AllowedHosts []string `env:"ALLOWED_HOSTS"`
	// DatabaseURL is a postgres:// URL; its password never shows. Without
	// pool_max_conns in it, the pool holds postgres.DefaultMaxConns
	// connections: one per order in flight.
	DatabaseURL config.SecretURL `env:"DATABASE_URL, required"`
	// Callers are the tokens the Twirp API accepts, as
	// name:sha256-hex entries (libs/internalauth).
	Callers internalauth.Callers `env:"CALLERS, required"`
	// InternalToken is ordering's own credential, sent to the catalogue
	// and the wallet.
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"`
	// CatalogueURL and WalletURL are the Twirp base URLs of the services.
	CatalogueURL config.BaseURL `env:"CATALOGUE_URL, required"`
	WalletURL    config.BaseURL `env:"WALLET_URL, required"`
	// ServiceTimeout bounds every call to another service.
	ServiceTimeout time.Duration `env:"SERVICE_TIMEOUT, default=5s"`
	// QRBaseURL is where the gateway serves QR images: an eSIM's is
	// QR_BASE_URL/<token>.png.
	QRBaseURL config.BaseURL `env:"QR_BASE_URL, required"`
	// SandboxSMDPAddress is the SM-DP+ address of sandbox profiles. The
	// default is under .invalid, which never resolves (RFC 6761), so a
	// sandbox QR code scanned by a real phone reaches no server.
	SandboxSMDPAddress string `env:"SANDBOX_SMDP_ADDRESS, default=smdp.sandbox.esim.invalid"`
	// SMDP is the SM-DP+ that issues live profiles over GSMA ES2+.
	// Without SMDP_URL live orders have no provider: they fail and are
	// refunded, as they would in a provider's outage.
	SMDP SMDPConfig
	// ES2Plus is the operator's side of ES2+: the listener where the
	// SM-DP+ reports downloads and installations of live profiles
	// (handleDownloadProgressInfo), over mutual TLS. Without ES2PLUS_ADDR
	// there is none, and live eSIMs install on their first attach.
	ES2Plus ES2PlusConfig
	// Network is the mobile network of live eSIMs: its usage feed and
	// bundles. Without NETWORK_URL live usage is never read and live
	// top-ups fail and are refunded.
	Network NetworkConfig
	// OrderTimeout bounds the processing of one order once started, which
	// goes on when its caller hangs up.
	OrderTimeout time.Duration `env:"ORDER_TIMEOUT, default=30s"`
	// ProviderTimeout bounds the provider's part of an order within
	// ORDER_TIMEOUT, leaving time to give back what a failed order holds
	// and to refund it.
	ProviderTimeout time.Duration `env:"PROVIDER_TIMEOUT, default=15s"`
	// IdempotencyWait bounds how long a call waits for another processing
	// the order of the same Idempotency-Key, holding no connection; then
	// it is an internal error the partner retries with the same key.
	IdempotencyWait time.Duration `env:"IDEMPOTENCY_WAIT, default=30s"`
	// OrderConcurrency is how many orders this replica processes at once,
	// each holding a database connection until it ends; the pool needs
	// postgres.ReservedConns more for everything else.
	OrderConcurrency int `env:"ORDER_CONCURRENCY, default=16"`
	// InFlightPerAccount caps the orders of one account and environment
	// in flight across replicas: past it, rate_limited.
	InFlightPerAccount int `env:"ORDERS_IN_FLIGHT_PER_ACCOUNT, default=8"`
	// RecoveryInterval is how often the recovery scan (a River periodic
	// job) looks for orders left unfinished, and RecoveryAfter how old an
	// unfinished order must be for it to take it: a younger one is left to
	// its caller's retry.
	RecoveryInterval time.Duration `env:"RECOVERY_INTERVAL, default=10s"`
	RecoveryAfter    time.Duration `env:"RECOVERY_AFTER, default=1m"`
	// ExpiryInterval is how often the expiry pass tells eSIMs expiring
	// within a day and expires those past their expiry; UsageInterval how
	// often the networks' usage feeds are read (River periodic jobs).
	ExpiryInterval time.Duration `env:"EXPIRY_INTERVAL, default=1m"`
	UsageInterval  time.Duration `env:"USAGE_INTERVAL, default=5m"`
	// Kafka is where the events of finished orders go (KAFKA_BROKERS,
	// KAFKA_TOPIC_PARTITIONS, KAFKA_REPLICATION_FACTOR). Orders never
	// wait for it: their events wait as River jobs while it is down.
	Kafka kafka.Config
	// KafkaTopic is the topic of order events, created before the first
	// publication unless it exists.
	KafkaTopic string `env:"KAFKA_TOPIC, default=esim.orders.v1"`
	// RelayInterval is how often River's queues look for jobs they were
	// not notified of (an order's event is published at once, on the
	// notification of its insert).
	RelayInterval time.Duration `env:"RELAY_INTERVAL, default=1s"`
	// OutboxRetention is how long finished jobs (published events) stay
	// in river_job, for inspection, before River's cleaner deletes them.
	OutboxRetention time.Duration `env:"OUTBOX_RETENTION, default=168h"`
	Telemetry       telemetry.Config
}

// maxOrderTimeout keeps an order's answer, which may wait up to
// ORDER_TIMEOUT for its processing, inside the server's write deadline
// with 10 s to spare.
const maxOrderTimeout = httpserver.WriteTimeout - 10*time.Second

// poolSize is the pool a database URL makes: its pool_max_conns, or
// ordering's default.
func poolSize(databaseURL string) (int, error) {
	if !strings.Contains(databaseURL, "pool_max_conns") {
		return orderingpostgres.DefaultMaxConns, nil
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return 0, err
	}
	return int(cfg.MaxConns), nil
}

// maxOrderConcurrency bounds ORDER_CONCURRENCY: each order in flight holds
// a Postgres connection, of which a server has a few hundred at most.
const maxOrderConcurrency = 256

// topicName is what Kafka accepts as a topic's name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// hostname is a DNS name of at least two labels, as an SM-DP+ address is
// (it goes in the activation code between two $, so nothing else may).
var hostname = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks what the types alone cannot; config.Parse runs it, and
// the deployment checks run it on what the charts render.
func (c Config) Validate() error {
	var errs []error
	if err := postgres.ValidateURL(c.DatabaseURL.Reveal()); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if n := len(c.InternalToken.Reveal()); n < internalauth.MinTokenLength {
		errs = append(errs, fmt.Errorf("INTERNAL_TOKEN: %d bytes; want at least %d, such as `openssl rand -base64 32` prints", n, internalauth.MinTokenLength))
	}
	if c.OrderTimeout <= 0 || c.OrderTimeout > maxOrderTimeout {
		errs = append(errs, fmt.Errorf("ORDER_TIMEOUT %s: must be above 0 and at most %s, so an order's answer is written before the server's write deadline", c.OrderTimeout, maxOrderTimeout))
	}
	if c.ServiceTimeout <= 0 || c.ServiceTimeout > c.OrderTimeout {
		errs = append(errs, fmt.Errorf("SERVICE_TIMEOUT %s: must be above 0 and at most ORDER_TIMEOUT (%s), which bounds the calls an order makes", c.ServiceTimeout, c.OrderTimeout))
	}
	// A failed order still debits-then-refunds and gives back its
	// profiles after the provider's time ran out: all within ORDER_TIMEOUT.
	if rest := c.OrderTimeout - 2*c.ServiceTimeout - c.SMDP.CancelBudget; c.ProviderTimeout <= 0 || c.ProviderTimeout > rest {
		errs = append(errs, fmt.Errorf("PROVIDER_TIMEOUT %s: must be above 0 and at most ORDER_TIMEOUT - 2 x SERVICE_TIMEOUT - SMDP_CANCEL_BUDGET (%s), so a failed order is refunded within ORDER_TIMEOUT", c.ProviderTimeout, rest))
	}
	if c.IdempotencyWait <= 0 || c.IdempotencyWait > maxOrderTimeout {
		errs = append(errs, fmt.Errorf("IDEMPOTENCY_WAIT %s: must be above 0 and at most %s", c.IdempotencyWait, maxOrderTimeout))
	}
	if c.OrderConcurrency < 2 || c.OrderConcurrency > maxOrderConcurrency {
		errs = append(errs, fmt.Errorf("ORDER_CONCURRENCY %d: want 2 to %d", c.OrderConcurrency, maxOrderConcurrency))
	}
	if maxConns, err := poolSize(c.DatabaseURL.Reveal()); err == nil && c.OrderConcurrency+orderingpostgres.ReservedConns > maxConns {
		errs = append(errs, fmt.Errorf("ORDER_CONCURRENCY %d needs a pool of at least %d connections (%d for everything but orders); DATABASE_URL's pool_max_conns is %d: raise it, or lower ORDER_CONCURRENCY",
			c.OrderConcurrency, c.OrderConcurrency+orderingpostgres.ReservedConns, orderingpostgres.ReservedConns, maxConns))
	}
	if c.InFlightPerAccount < 1 || c.InFlightPerAccount > c.OrderConcurrency/2 {
		errs = append(errs, fmt.Errorf("ORDERS_IN_FLIGHT_PER_ACCOUNT %d: want 1 to half of ORDER_CONCURRENCY (%d), so no one account can take most of a replica's orders in flight", c.InFlightPerAccount, c.OrderConcurrency/2))
	}
	if c.RecoveryInterval <= 0 {
		errs = append(errs, fmt.Errorf("RECOVERY_INTERVAL %s: must be positive", c.RecoveryInterval))
	}
	if c.RecoveryAfter <= 0 {
		errs = append(errs, fmt.Errorf("RECOVERY_AFTER %s: must be positive", c.RecoveryAfter))
	}
	if c.ExpiryInterval <= 0 {
		errs = append(errs, fmt.Errorf("EXPIRY_INTERVAL %s: must be positive", c.ExpiryInterval))
	}
	if c.UsageInterval <= 0 {
		errs = append(errs, fmt.Errorf("USAGE_INTERVAL %s: must be positive", c.UsageInterval))
	}
	if !topicName.MatchString(c.KafkaTopic) {
		errs = append(errs, fmt.Errorf("KAFKA_TOPIC %q: want 1 to 249 letters, digits, '.', '_' or '-', such as esim.orders.v1", c.KafkaTopic))
	}
	if c.RelayInterval <= 0 {
		errs = append(errs, fmt.Errorf("RELAY_INTERVAL %s: must be positive", c.RelayInterval))
	}
	if c.OutboxRetention <= 0 {
		errs = append(errs, fmt.Errorf("OUTBOX_RETENTION %s: must be positive", c.OutboxRetention))
	}
	if len(c.SandboxSMDPAddress) > 253 || !hostname.MatchString(c.SandboxSMDPAddress) {
		errs = append(errs, fmt.Errorf("SANDBOX_SMDP_ADDRESS %q: want a lower-case DNS name such as smdp.sandbox.esim.invalid", c.SandboxSMDPAddress))
	}
	errs = append(errs, c.SMDP.validate(c.ProviderTimeout), c.ES2Plus.validate(c.HTTP.Addr), c.Network.validate(c.ProviderTimeout))
	errs = append(errs, c.HTTP.Validate(), httpserver.CheckAllowedHosts(c.AllowedHosts), c.Kafka.Validate(), c.Telemetry.Validate())
	return errors.Join(errs...)
}

// SMDPConfig is where the SM-DP+ of live orders is and how ordering
// authenticates to it (mutual TLS, as SGP.22 asks): in a cluster the files
// come from a Secret.
type SMDPConfig struct {
	// URL is the SM-DP+'s ES2+ base URL (https); empty: no live provider.
	URL string `env:"SMDP_URL"`
	// CertFile and KeyFile are ordering's client certificate chain and
	// key; CAFile the CA certificates that sign the SM-DP+'s (PEM). The
	// system roots are not trusted.
	CertFile string `env:"SMDP_CERT_FILE"`
	KeyFile  string `env:"SMDP_KEY_FILE"`
	CAFile   string `env:"SMDP_CA_FILE"`
	// Timeout bounds each ES2+ call; an order of N eSIMs makes 2N.
	Timeout time.Duration `env:"SMDP_TIMEOUT, default=10s"`
	// RequesterID is the functionRequesterIdentifier of every call: the
	// operator's identity at the SM-DP+.
	RequesterID string `env:"SMDP_REQUESTER_ID, default=esim-platform"`
	// ProfileTypes maps plans to the SM-DP+'s profile types:
	// "*=<type>" for every plan, then "<plan id>=<type>" exceptions.
	ProfileTypes string `env:"SMDP_PROFILE_TYPES"`
	// CancelInterval is the wait before cancellations of failed orders'
	// profiles that ended without an answer are tried again (the
	// canceller's River job snoozes that long).
	CancelInterval time.Duration `env:"SMDP_CANCEL_INTERVAL, default=30s"`
	// CancelBudget bounds how long a failing order gives back its
	// profiles itself, and the canceller each order in turn; what is left
	// goes to the canceller (every SMDP_CANCEL_INTERVAL), so a failed
	// order is refunded promptly.
	CancelBudget time.Duration `env:"SMDP_CANCEL_BUDGET, default=5s"`
	// Address is the SM-DP+ address of activation codes when confirmOrder
	// answers none (SGP.22 makes it optional); empty: SMDP_URL's host.
	Address string `env:"SMDP_ADDRESS"`
	// AdminProtocol is sent in X-Admin-Protocol: the ES2+ version agreed
	// with the SM-DP+.
	AdminProtocol string `env:"SMDP_ADMIN_PROTOCOL, default=gsma/rsp/v2.5.0"`
	// ConfirmationCodes are "<profile type>=<code>,..." for the profile
	// types whose downloads need a confirmation code: confirmOrder sends
	// it.
	ConfirmationCodes config.Secret `env:"SMDP_CONFIRMATION_CODES"`
}

// address is the SM-DP+ address of activation codes that confirmOrder
// leaves out.
func (c SMDPConfig) address() string {
	if c.Address != "" {
		return c.Address
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// confirmationCodes is ConfirmationCodes by profile type.
func (c SMDPConfig) confirmationCodes() (map[string]string, error) {
	out := map[string]string{}
	raw := strings.TrimSpace(string(c.ConfirmationCodes.Reveal()))
	if raw == "" {
		return out, nil
	}
	for entry := range strings.SplitSeq(raw, ",") {
		typ, code, ok := strings.Cut(strings.TrimSpace(entry), "=")
		// The code is a secret: an error names its entry by position.
		if !ok || !profileTypeName.MatchString(typ) || code == "" || len(code) > 64 || strings.ContainsFunc(code, func(r rune) bool { return r <= ' ' || r > '~' || r == ',' }) {
			return nil, fmt.Errorf("entry %d: want <profile type>=<code of 1 to 64 printable ASCII characters>", len(out)+1)
		}
		if _, dup := out[typ]; dup {
			return nil, fmt.Errorf("profile type %s is given twice", typ)
		}
		out[typ] = code
	}
	return out, nil
}

// profileTypeName is what SMDP_PROFILE_TYPES accepts as a profile type.
var profileTypeName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c SMDPConfig) validate(providerTimeout time.Duration) error {
	if c.URL == "" {
		for name, v := range map[string]string{"SMDP_CERT_FILE": c.CertFile, "SMDP_KEY_FILE": c.KeyFile, "SMDP_CA_FILE": c.CAFile, "SMDP_PROFILE_TYPES": c.ProfileTypes, "SMDP_ADDRESS": c.Address, "SMDP_CONFIRMATION_CODES": string(c.ConfirmationCodes.Reveal())} {
			if v != "" {
				return fmt.Errorf("%s is set but SMDP_URL is not: set SMDP_URL to the SM-DP+'s ES2+ URL, or unset %s", name, name)
			}
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("SMDP_URL %q: want an https:// URL without credentials, query or fragment, such as https://smdp.example.com", c.URL))
	}
	for name, v := range map[string]string{"SMDP_CERT_FILE": c.CertFile, "SMDP_KEY_FILE": c.KeyFile, "SMDP_CA_FILE": c.CAFile} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s: required with SMDP_URL (mutual TLS: ordering's certificate, its key, and the CA of the SM-DP+'s)", name))
		}
	}
	if c.Timeout <= 0 || c.Timeout > providerTimeout {
		errs = append(errs, fmt.Errorf("SMDP_TIMEOUT %s: must be above 0 and at most PROVIDER_TIMEOUT (%s)", c.Timeout, providerTimeout))
	}
	if c.CancelBudget <= 0 {
		errs = append(errs, fmt.Errorf("SMDP_CANCEL_BUDGET %s: must be positive", c.CancelBudget))
	}
	if a := c.Address; a != "" && (len(a) > 253 || !hostname.MatchString(a)) {
		errs = append(errs, fmt.Errorf("SMDP_ADDRESS %q: want a lower-case DNS name such as smdp.example.com", a))
	}
	if !es2plus.ValidProtocolVersion(c.AdminProtocol) {
		errs = append(errs, fmt.Errorf("SMDP_ADMIN_PROTOCOL %q: want gsma/rsp/v2.x.y, such as gsma/rsp/v2.5.0", c.AdminProtocol))
	}
	if _, err := c.confirmationCodes(); err != nil {
		errs = append(errs, fmt.Errorf("SMDP_CONFIRMATION_CODES: %w", err))
	}
	if c.RequesterID == "" || len(c.RequesterID) > 64 {
		errs = append(errs, fmt.Errorf("SMDP_REQUESTER_ID: want 1 to 64 characters"))
	}
	if _, err := es2plus.ParseProfileTypes(c.ProfileTypes); err != nil {
		errs = append(errs, fmt.Errorf("SMDP_PROFILE_TYPES: %w", err))
	}
	if c.CancelInterval <= 0 {
		errs = append(errs, fmt.Errorf("SMDP_CANCEL_INTERVAL %s: must be positive", c.CancelInterval))
	}
	return errors.Join(errs...)
}

// ES2PlusConfig is ordering's ES2+ listener, which only the SM-DP+ may
// reach: a client certificate of ClientCAFile is required at the
// handshake. In a cluster the files come from a Secret.
type ES2PlusConfig struct {
	// Addr is where it listens ([host]:port); empty: no listener.
	Addr string `env:"ES2PLUS_ADDR"`
	// CertFile and KeyFile are the listener's server certificate and key;
	// ClientCAFile the CA certificates that sign the SM-DP+'s client
	// certificate (PEM).
	CertFile     string `env:"ES2PLUS_CERT_FILE"`
	KeyFile      string `env:"ES2PLUS_KEY_FILE"`
	ClientCAFile string `env:"ES2PLUS_CLIENT_CA_FILE"`
}

func (c ES2PlusConfig) validate(httpAddr string) error {
	files := map[string]string{"ES2PLUS_CERT_FILE": c.CertFile, "ES2PLUS_KEY_FILE": c.KeyFile, "ES2PLUS_CLIENT_CA_FILE": c.ClientCAFile}
	if c.Addr == "" {
		for name, v := range files {
			if v != "" {
				return fmt.Errorf("%s is set but ES2PLUS_ADDR is not: set ES2PLUS_ADDR to serve the SM-DP+'s notifications, or unset %s", name, name)
			}
		}
		return nil
	}
	var errs []error
	_, port, err := net.SplitHostPort(c.Addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		errs = append(errs, fmt.Errorf("ES2PLUS_ADDR %q: want [host]:port, such as :8443", c.Addr))
	} else if c.Addr == httpAddr && port != "0" {
		errs = append(errs, fmt.Errorf("ES2PLUS_ADDR %q is HTTP_ADDR too: ES2+ needs a port of its own", c.Addr))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if files[name] == "" {
			errs = append(errs, fmt.Errorf("%s: required with ES2PLUS_ADDR (mutual TLS: the listener's certificate, its key, and the CA of the SM-DP+'s)", name))
		}
	}
	return errors.Join(errs...)
}

// NetworkConfig is where the mobile network's API is and how ordering
// authenticates to it (mutual TLS).
type NetworkConfig struct {
	// URL is the API's base URL (https); empty: no network.
	URL string `env:"NETWORK_URL"`
	// CertFile and KeyFile are ordering's client certificate and key;
	// CAFile the CA certificates that sign the network's (PEM).
	CertFile string `env:"NETWORK_CERT_FILE"`
	KeyFile  string `env:"NETWORK_KEY_FILE"`
	CAFile   string `env:"NETWORK_CA_FILE"`
	// Timeout bounds each call: a usage read of a batch, a bundle.
	Timeout time.Duration `env:"NETWORK_TIMEOUT, default=10s"`
}

func (c NetworkConfig) validate(providerTimeout time.Duration) error {
	files := map[string]string{"NETWORK_CERT_FILE": c.CertFile, "NETWORK_KEY_FILE": c.KeyFile, "NETWORK_CA_FILE": c.CAFile}
	if c.URL == "" {
		for name, v := range files {
			if v != "" {
				return fmt.Errorf("%s is set but NETWORK_URL is not: set NETWORK_URL to the network's API, or unset %s", name, name)
			}
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("NETWORK_URL %q: want an https:// URL without credentials, query or fragment, such as https://network.example.com", c.URL))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if files[name] == "" {
			errs = append(errs, fmt.Errorf("%s: required with NETWORK_URL (mutual TLS: ordering's certificate, its key, and the CA of the network's)", name))
		}
	}
	// A top-up's bundle is the provider's part of a purchase.
	if c.Timeout <= 0 || c.Timeout > providerTimeout {
		errs = append(errs, fmt.Errorf("NETWORK_TIMEOUT %s: must be above 0 and at most PROVIDER_TIMEOUT (%s)", c.Timeout, providerTimeout))
	}
	return errors.Join(errs...)
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
