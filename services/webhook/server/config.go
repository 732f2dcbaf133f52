package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/postgres"
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
	// Workers is how many attempts a replica makes at once.
	Workers int `env:"WORKERS, default=16"`
	// PerEndpointConcurrency caps the attempts in flight to one endpoint
	// across replicas, so that a slow or dead endpoint holds that many
	// workers at most and other partners' events go on.
	PerEndpointConcurrency int `env:"PER_ENDPOINT_CONCURRENCY, default=4"`
	// AttemptTimeout bounds one attempt (the spec's 10 s).
	AttemptTimeout time.Duration `env:"ATTEMPT_TIMEOUT, default=10s"`
	// PollInterval is how often an idle replica looks for due jobs it
	// was not woken for: other replicas' and those a crash left.
	PollInterval time.Duration `env:"POLL_INTERVAL, default=500ms"`
	// AllowPrivateEndpoints lists the environments (sandbox, live) whose
	// endpoints may be on loopback and private addresses: sandbox for
	// `make run`, where a receiver runs on the developer's machine.
	AllowPrivateEndpoints []string `env:"ALLOW_PRIVATE_ENDPOINTS"`
	// EndpointCAFile is an optional PEM file of certificate authorities
	// trusted for https endpoints besides the system's.
	EndpointCAFile string `env:"ENDPOINT_CA_FILE"`
	Telemetry      telemetry.Config
}

// Bounds of the settings.
const (
	maxWorkers        = 1024
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
	if c.Workers < 1 || c.Workers > maxWorkers {
		errs = append(errs, fmt.Errorf("WORKERS %d: want 1 to %d", c.Workers, maxWorkers))
	}
	if c.PerEndpointConcurrency < 1 || c.PerEndpointConcurrency > c.Workers {
		errs = append(errs, fmt.Errorf("PER_ENDPOINT_CONCURRENCY %d: want 1 to WORKERS (%d), so that one endpoint cannot hold every worker", c.PerEndpointConcurrency, c.Workers))
	}
	if c.AttemptTimeout <= 0 || c.AttemptTimeout > maxAttemptTimeout {
		errs = append(errs, fmt.Errorf("ATTEMPT_TIMEOUT %s: want above 0 and at most %s", c.AttemptTimeout, maxAttemptTimeout))
	}
	if c.PollInterval < minPollInterval || c.PollInterval > maxPollInterval {
		errs = append(errs, fmt.Errorf("POLL_INTERVAL %s: want %s to %s", c.PollInterval, minPollInterval, maxPollInterval))
	}
	for _, env := range c.AllowPrivateEndpoints {
		if !slices.Contains(webhook.Environments, webhook.Environment(env)) {
			errs = append(errs, fmt.Errorf("ALLOW_PRIVATE_ENDPOINTS: %q is no environment; want sandbox, live or both, comma-separated", env))
		}
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

// allowPrivate is AllowPrivateEndpoints as environments.
func (c Config) allowPrivate() []webhook.Environment {
	envs := make([]webhook.Environment, len(c.AllowPrivateEndpoints))
	for i, e := range c.AllowPrivateEndpoints {
		envs[i] = webhook.Environment(e)
	}
	return envs
}
