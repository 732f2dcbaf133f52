package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/embedded"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/telemetry"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

func TestServerServesAPIAndProbes(t *testing.T) {
	t.Parallel()
	s := start(t)
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ok"`} {
		if code, body := httpservertest.Get(t, s.url+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 containing %s", path, code, body, want)
		}
	}
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: live}
	for _, caller := range []internalauth.Caller{internalauth.Operator, internalauth.Portal} {
		e, err := webhooktest.Client(s.url, caller).SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: "https://partner.example.com/hooks"})
		if err != nil || !strings.HasPrefix(e.GetSecret(), "whsec_") {
			t.Errorf("SetEndpoint as %s = %v, %v", caller, e, err)
		}
	}
	if _, err := webhooktest.Client(s.url, internalauth.Gateway).ListEvents(context.Background(), &webhookv1.ListEventsRequest{Scope: scope}); err != nil {
		t.Errorf("ListEvents as the gateway: %v", err)
	}
}

// The assembled service refuses calls without a credential, and callers
// outside the policy, before anything is done: the gateway, which faces
// the internet, never reads or sets a secret.
func TestServerProtectsTheAPI(t *testing.T) {
	t.Parallel()
	s := start(t)
	ctx := context.Background()
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: live}
	nobody := webhookv1.NewWebhookProtobufClient(s.url, http.DefaultClient)
	gateway := webhooktest.Client(s.url, internalauth.Gateway)
	ordering := webhooktest.Client(s.url, internalauth.Ordering)
	for name, call := range map[string]func() error{
		"SetEndpoint without a token": func() error {
			_, err := nobody.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: "https://example.com"})
			return want(err, twirp.Unauthenticated)
		},
		"SetEndpoint by the gateway": func() error {
			_, err := gateway.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: "https://example.com"})
			return want(err, twirp.PermissionDenied)
		},
		"GetEndpoint by the gateway": func() error {
			_, err := gateway.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
			return want(err, twirp.PermissionDenied)
		},
		"ListEvents by ordering": func() error {
			_, err := ordering.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: scope})
			return want(err, twirp.PermissionDenied)
		},
	} {
		if err := call(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope}); want(err, twirp.NotFound) != nil {
		t.Errorf("after refused calls, GetEndpoint = %v; want nothing set", err)
	}
	if !strings.Contains(s.logs.String(), "internal call refused") {
		t.Errorf("refusals are not logged:\n%s", s.logs)
	}
}

func want(err error, code twirp.ErrorCode) error {
	var twerr twirp.Error
	if !errors.As(err, &twerr) || twerr.Code() != code {
		return errors.New("err = " + errString(err) + ", want " + string(code))
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// Kafka down is no reason not to start: the API serves and is ready (the
// database is), and once the broker is up the consumer catches up.
func TestStartsWithoutKafkaAndCatchesUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	hooks := webhooktest.NewReceiver(t)
	cfg := webhooktest.Config(t, kafkatest.Cluster{Config: kafka.Config{Brokers: []string{"127.0.0.1:" + strconv.Itoa(port)}, Partitions: 1, ReplicationFactor: 1}})
	s := startWith(t, cfg)
	if code, _ := httpservertest.Get(t, s.url+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz without Kafka = %d, want 200", code)
	}
	scope, _ := s.endpoint(t, sandbox, hooks.URL)
	if !waitForLog(s, "cannot make sure the Kafka topic exists", 30*time.Second) {
		t.Fatalf("no retry logged:\n%s", s.logs)
	}

	kafkatest.Embedded(t, embedded.Options{Port: port})
	e := event(scope, "order.completed")
	s.publish(t, e)
	s.wait(t, e.GetId(), delivered, 60*time.Second)
}

func waitForLog(s *service, text string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !strings.Contains(s.logs.String(), text) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func TestNewFailsWithoutDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "webhook", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhooktest.Config(t, kafkatest.Cluster{Config: kafka.Config{Brokers: []string{"127.0.0.1:1"}}})
	// Port 1 on loopback refuses connections at once.
	cfg.DatabaseURL = config.NewSecretURL("postgres://postgres:hunter2@127.0.0.1:1/webhook?sslmode=disable&connect_timeout=2")
	_, err = server.New(ctx, cfg, tel)
	if err == nil {
		t.Fatal("server.New succeeded without a database")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error reveals the database password: %v", err)
	}
	if _, err := server.New(ctx, cfg, nil); err == nil {
		t.Error("server.New accepted nil telemetry")
	}
}

// A service started with another SECRETS_KEY than the one that sealed
// the stored secrets refuses to start: it could sign nothing.
func TestNewRefusesAnotherSecretsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := webhooktest.Config(t, kafkatest.New(t))
	s := startWith(t, cfg)
	s.endpoint(t, live, "https://partner.example.com/hooks")

	tel, err := telemetry.Setup(ctx, "webhook", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.SecretsKey = config.NewSecret(webhooktest.NewSecretsKey())
	srv, err := server.New(ctx, other, tel)
	if err == nil {
		srv.Close()
		t.Fatal("server.New started with another secrets key")
	}
	if !strings.Contains(err.Error(), "SECRETS_KEY") || strings.Contains(err.Error(), string(other.SecretsKey.Reveal())) {
		t.Errorf("err = %v; want it to name SECRETS_KEY, not show it", err)
	}
	srv, err = server.New(ctx, cfg, tel)
	if err != nil {
		t.Fatalf("server.New with the right key: %v", err)
	}
	srv.Close()
}

// The variables, their defaults and what Validate refuses, every fault
// named at once and no secret shown.
func TestConfig(t *testing.T) {
	t.Parallel()
	key := webhooktest.NewSecretsKey()
	good := map[string]string{
		"DATABASE_URL":  "postgres://u@h:5432/webhook",
		"CALLERS":       internalauthtest.CallersEnv(),
		"KAFKA_BROKERS": "kafka:9092",
		"SECRETS_KEY":   key,
	}
	parse := func(over map[string]string) (server.Config, error) {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		for k, v := range over {
			env[k] = v
		}
		var cfg server.Config
		err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg)
		return cfg, err
	}
	cfg, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Topic != "esim.orders.v1" || cfg.Group != "webhook" || cfg.Workers != 256 || cfg.PerEndpointConcurrency != 4 ||
		cfg.AttemptTimeout != 10*time.Second || cfg.PollInterval != 100*time.Millisecond || len(cfg.SandboxPrivateEndpoints) != 0 || cfg.EndpointCAFile != "" {
		t.Errorf("defaults: %+v", cfg)
	}
	for _, ok := range []map[string]string{
		{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1:9999,[::1]:9999,10.1.2.3:8080,[fd00::1]:443,100.64.0.1:80,[::ffff:127.0.0.1]:9998"},
		{"WORKERS": "16", "PER_ENDPOINT_CONCURRENCY": "1"},
		{"WORKERS": "64", "PER_ENDPOINT_CONCURRENCY": "4"},
	} {
		if _, err := parse(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"no secrets key":     {map[string]string{"SECRETS_KEY": ""}, []string{"SECRETS_KEY is required"}},
		"a short key":        {map[string]string{"SECRETS_KEY": "c2hvcnQ="}, []string{"SECRETS_KEY: want the base64 of 32 random bytes"}},
		"a key not base64":   {map[string]string{"SECRETS_KEY": "hunter2!hunter2!hunter2!hunter2!hunter2!hunter2"}, []string{"SECRETS_KEY"}},
		"no brokers":         {map[string]string{"KAFKA_BROKERS": ""}, []string{"KAFKA_BROKERS is required"}},
		"a bad topic":        {map[string]string{"KAFKA_TOPIC": "orders v1"}, []string{`KAFKA_TOPIC "orders v1"`}},
		"no workers":         {map[string]string{"WORKERS": "0"}, []string{"WORKERS 0: want 16 to 4096"}},
		"few workers":        {map[string]string{"WORKERS": "15", "PER_ENDPOINT_CONCURRENCY": "1"}, []string{"WORKERS 15: want 16 to 4096"}},
		"a cap over workers": {map[string]string{"WORKERS": "4", "PER_ENDPOINT_CONCURRENCY": "5"}, []string{"PER_ENDPOINT_CONCURRENCY 5: want 1 to WORKERS/16 (1)"}},
		"a large share":      {map[string]string{"WORKERS": "256", "PER_ENDPOINT_CONCURRENCY": "17"}, []string{"PER_ENDPOINT_CONCURRENCY 17: want 1 to WORKERS/16 (16), so that one endpoint holds a small share"}},
		"no cap":             {map[string]string{"PER_ENDPOINT_CONCURRENCY": "0"}, []string{"PER_ENDPOINT_CONCURRENCY 0"}},
		"no timeout":         {map[string]string{"ATTEMPT_TIMEOUT": "0s"}, []string{"ATTEMPT_TIMEOUT 0s"}},
		"a tiny poll":        {map[string]string{"POLL_INTERVAL": "1ms"}, []string{"POLL_INTERVAL 1ms"}},
		"an environment":     {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "sandbox"}, []string{`SANDBOX_PRIVATE_ENDPOINTS: "sandbox": want an IP address and its port`}},
		"a name":             {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "localhost:9999"}, []string{`"localhost:9999": want an IP address and its port`, "not a name"}},
		"no port":            {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1"}, []string{`"127.0.0.1": want an IP address and its port`}},
		"port 0":             {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1:0"}, []string{`"127.0.0.1:0": want a port from 1 to 65535`}},
		"a range":            {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.0/8:80"}, []string{`"127.0.0.0/8:80": want an IP address`, "nor a range"}},
		"a port range":       {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1:1-65535"}, []string{`"127.0.0.1:1-65535": want an IP address`}},
		"a wildcard port":    {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1:*"}, []string{`"127.0.0.1:*": want an IP address`}},
		"the metadata":       {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.1:9999,169.254.169.254:80"}, []string{`"169.254.169.254:80" is a link-local address, which no setting opens`}},
		"link-local v6":      {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "[fe80::1%eth0]:80"}, []string{`"[fe80::1%eth0]:80": want an IP address`}},
		"unspecified":        {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "0.0.0.0:9999"}, []string{`"0.0.0.0:9999" is an unspecified address`}},
		"a public address":   {map[string]string{"SANDBOX_PRIVATE_ENDPOINTS": "93.184.216.34:443"}, []string{`"93.184.216.34:443" is a public address`}},
		"everything at once": {map[string]string{"SECRETS_KEY": "hunter2", "WORKERS": "0", "ATTEMPT_TIMEOUT": "2m", "KAFKA_BROKERS": "kafka"},
			[]string{"SECRETS_KEY", "WORKERS", "ATTEMPT_TIMEOUT", "KAFKA_BROKERS"}},
	} {
		_, err := parse(tc.env)
		if err == nil {
			t.Errorf("%s: parsed", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to mention %s", name, err, w)
			}
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
}
