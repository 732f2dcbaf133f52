package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/aesgcm"
)

// Config is everything the webhook service reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// AllowedHosts are names the service answers to besides loopback, IP
	// addresses and cluster names (httpserver.InternalHost): a DNS name
	// of its own, when it has one.
	AllowedHosts []string `env:"ALLOWED_HOSTS"`
	// DatabaseURL is a postgres:// URL; its password never shows. Without
	// pool_max_conns in it, the pool holds DefaultMaxConns connections.
	DatabaseURL config.SecretURL `env:"DATABASE_URL, required"`
	// Callers are the tokens the Twirp API accepts, as name:sha256-hex
	// entries (libs/internalauth): operators, the portal, the gateway.
	Callers internalauth.Callers `env:"CALLERS, required"`
	// Kafka is where ordering's events are (KAFKA_BROKERS, ...).
	Kafka kafka.Config
	// Topic is ordering's events' topic, Group the consumer group every
	// replica joins, sharing the topic's partitions.
	Topic string `env:"KAFKA_TOPIC, default=esim.orders.v1"`
	Group string `env:"KAFKA_GROUP, default=webhook"`
	// SecretsKey seals the signing secrets in the database (AES-256-GCM):
	// the base64 of 32 random bytes, as `openssl rand -base64 32` prints.
	// Changing it makes every stored secret unreadable, and the service
	// refuses to start over them.
	SecretsKey config.Secret `env:"SECRETS_KEY, required"`
	// Workers is how many attempts a replica makes at once in each
	// environment: sandbox and live have a River queue each. Attempts
	// wait on the network, so workers are cheap.
	Workers int `env:"WORKERS, default=256"`
	// PerEndpointConcurrency caps the attempts in flight to one endpoint
	// across replicas, so that a slow or dead endpoint holds that many
	// workers at most and other partners' events go on. At most a
	// sixteenth of Workers: filling a pool takes 64 slow endpoints at
	// once with the defaults, never fewer than 16.
	PerEndpointConcurrency int `env:"PER_ENDPOINT_CONCURRENCY, default=4"`
	// AttemptTimeout bounds one attempt (the spec's 10 s).
	AttemptTimeout time.Duration `env:"ATTEMPT_TIMEOUT, default=10s"`
	// PollInterval is how often River looks for due jobs no notification
	// announced (its FetchPollInterval): retries falling due (a retry
	// runs within it of its 1 s or 2 s) and jobs waiting for their
	// endpoint's cap. New jobs are announced over LISTEN/NOTIFY.
	PollInterval time.Duration `env:"POLL_INTERVAL, default=100ms"`
	// SandboxPrivateEndpoints lists the loopback and private addresses,
	// each with its port (127.0.0.1:9999, [::1]:9999), that sandbox
	// endpoints may reach: for `make run`, the receiver of `esimctl
	// webhooks listen` on the developer's machine. Each is named: never
	// a range, never a name (which could resolve anywhere), never a
	// link-local address; live endpoints can have none.
	SandboxPrivateEndpoints []string `env:"SANDBOX_PRIVATE_ENDPOINTS"`
	// EndpointCAFile is an optional PEM file of certificate authorities
	// trusted for https endpoints besides the system's.
	EndpointCAFile string `env:"ENDPOINT_CA_FILE"`
	Telemetry      telemetry.Config

	// Set by tests, never from the environment:

	// TestEndpoints opens further loopback host:ports, in either
	// environment: the receivers tests start (webhooktest), on ports
	// picked as they listen. A deployment leaves it nil.
	TestEndpoints webhook.PrivateEndpoints
	// Resolver looks up the host of a live URL being saved; nil is the
	// system's. Tests give names of their own addresses with it.
	Resolver webhook.Resolver
}

// Bounds of the settings.
const (
	// maxShare is the largest share of a pool's workers one endpoint may
	// hold, as a fraction: 1/maxShare.
	maxShare          = 16
	minWorkers        = maxShare
	maxWorkers        = 4096
	maxAttemptTimeout = time.Minute
	minPollInterval   = 10 * time.Millisecond
	maxPollInterval   = time.Minute
)

// topicName is what Kafka accepts as a topic or group name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate checks what the types alone cannot; config.Parse runs it, and
// the deployment checks run it on what the charts render.
func (c Config) Validate() error {
	var errs []error
	if err := postgres.ValidateURL(c.DatabaseURL.Reveal()); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	// A zero Callers (a Config built in code) would refuse every call.
	if len(c.Callers.Names()) == 0 {
		errs = append(errs, errors.New("CALLERS: no callers, so every call would be refused"))
	}
	if _, err := c.secretsKey(); err != nil {
		errs = append(errs, err)
	}
	if !topicName.MatchString(c.Topic) {
		errs = append(errs, fmt.Errorf("KAFKA_TOPIC %q: want 1 to 249 letters, digits, '.', '_' or '-'", c.Topic))
	}
	if !topicName.MatchString(c.Group) {
		errs = append(errs, fmt.Errorf("KAFKA_GROUP %q: want 1 to 249 letters, digits, '.', '_' or '-'", c.Group))
	}
	if c.Workers < minWorkers || c.Workers > maxWorkers {
		errs = append(errs, fmt.Errorf("WORKERS %d: want %d to %d", c.Workers, minWorkers, maxWorkers))
	}
	if limit := max(1, c.Workers/maxShare); c.PerEndpointConcurrency < 1 || c.PerEndpointConcurrency > limit {
		errs = append(errs, fmt.Errorf("PER_ENDPOINT_CONCURRENCY %d: want 1 to WORKERS/%d (%d), so that one endpoint holds a small share of the workers at most", c.PerEndpointConcurrency, maxShare, limit))
	}
	if c.AttemptTimeout <= 0 || c.AttemptTimeout > maxAttemptTimeout {
		errs = append(errs, fmt.Errorf("ATTEMPT_TIMEOUT %s: want above 0 and at most %s", c.AttemptTimeout, maxAttemptTimeout))
	}
	if c.PollInterval < minPollInterval || c.PollInterval > maxPollInterval {
		errs = append(errs, fmt.Errorf("POLL_INTERVAL %s: want %s to %s", c.PollInterval, minPollInterval, maxPollInterval))
	}
	if _, err := c.sandboxPrivateEndpoints(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Kafka.Validate(), c.HTTP.Validate(), httpserver.CheckAllowedHosts(c.AllowedHosts), c.Telemetry.Validate())
	return errors.Join(errs...)
}

// secretsKey is SECRETS_KEY's bytes. Its errors never show the value.
func (c Config) secretsKey() ([]byte, error) {
	raw := c.SecretsKey.Reveal()
	key, err := base64.StdEncoding.DecodeString(string(raw))
	if err != nil || len(key) != aesgcm.KeySize {
		return nil, fmt.Errorf("SECRETS_KEY: want the base64 of %d random bytes, such as `openssl rand -base64 %d` prints", aesgcm.KeySize, aesgcm.KeySize)
	}
	return key, nil
}

// sandboxPrivateEndpoints is SandboxPrivateEndpoints as addresses.
func (c Config) sandboxPrivateEndpoints() ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	var errs []error
	for _, entry := range c.SandboxPrivateEndpoints {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(entry))
		if err != nil || ap.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("SANDBOX_PRIVATE_ENDPOINTS: %q: want an IP address and its port, such as 127.0.0.1:9999 or [::1]:9999 (not a name, which could resolve anywhere, nor a range)", entry))
			continue
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		kind, openable := webhook.AddressKind(ap.Addr())
		switch {
		case ap.Port() == 0:
			errs = append(errs, fmt.Errorf("SANDBOX_PRIVATE_ENDPOINTS: %q: want a port from 1 to 65535", entry))
		case kind == "":
			errs = append(errs, fmt.Errorf("SANDBOX_PRIVATE_ENDPOINTS: %q is a public address, which endpoints reach without an entry", entry))
		case !openable:
			errs = append(errs, fmt.Errorf("SANDBOX_PRIVATE_ENDPOINTS: %q is %s address, which no setting opens", entry, kind))
		default:
			out = append(out, ap)
		}
	}
	return out, errors.Join(errs...)
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
