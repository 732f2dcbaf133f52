package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

// Config is everything the simulator reads from its environment.
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// ES2PlusAddr is where ES2+ is served, over mutual TLS.
	ES2PlusAddr string `env:"ES2PLUS_ADDR, default=:8443"`
	// TLSCertFile and TLSKeyFile are the server's certificate and key
	// (PEM); ClientCAFile the CA that signs the callers' certificates.
	TLSCertFile  string `env:"TLS_CERT_FILE, required"`
	TLSKeyFile   string `env:"TLS_KEY_FILE, required"`
	ClientCAFile string `env:"CLIENT_CA_FILE, required"`
	// SMDPAddress is what confirmOrder answers as the SM-DP+ address of
	// activation codes. The default is a name that resolves nowhere, so
	// a dev activation code can never reach a real SM-DP+.
	SMDPAddress string `env:"SMDP_ADDRESS, default=smdp-sim.esim.invalid"`
	// ProfileTypes are the pools, as type:count entries separated by
	// commas.
	ProfileTypes string `env:"PROFILE_TYPES, default=esim-travel:10000"`
	// ControlAPI serves /control/ (state, faults, reset) on HTTP_ADDR:
	// off in production.
	ControlAPI bool `env:"CONTROL_API, default=false"`
	// ControlToken is the bearer token every control call must carry;
	// required with CONTROL_API.
	ControlToken config.Secret `env:"CONTROL_TOKEN"`
	// Operator is where the simulator reports downloads and
	// installations (ES2+ handleDownloadProgressInfo), as an SM-DP+ does.
	Operator  OperatorConfig
	Telemetry telemetry.Config
}

// OperatorConfig is the operator's ES2+ endpoint and the simulator's
// credentials there (mutual TLS). Without OPERATOR_URL no one is told.
type OperatorConfig struct {
	// URL is the operator's ES2+ base URL (https), without the function's
	// path.
	URL string `env:"OPERATOR_URL"`
	// CertFile and KeyFile are the simulator's client certificate and
	// key; CAFile the CA of the operator's server certificate (PEM).
	CertFile string `env:"OPERATOR_CERT_FILE"`
	KeyFile  string `env:"OPERATOR_KEY_FILE"`
	CAFile   string `env:"OPERATOR_CA_FILE"`
	// RequesterID is the functionRequesterIdentifier of notifications:
	// the SM-DP+'s identity at the operator.
	RequesterID string `env:"OPERATOR_REQUESTER_ID, default=smdp-sim"`
	// Timeout bounds each notification.
	Timeout time.Duration `env:"OPERATOR_TIMEOUT, default=10s"`
}

func (c OperatorConfig) validate() error {
	if c.URL == "" {
		for name, v := range map[string]string{"OPERATOR_CERT_FILE": c.CertFile, "OPERATOR_KEY_FILE": c.KeyFile, "OPERATOR_CA_FILE": c.CAFile} {
			if v != "" {
				return fmt.Errorf("%s is set but OPERATOR_URL is not: set OPERATOR_URL to the operator's ES2+ URL, or unset %s", name, name)
			}
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("OPERATOR_URL %q: want an https:// URL without credentials, query or fragment", c.URL))
	}
	for name, v := range map[string]string{"OPERATOR_CERT_FILE": c.CertFile, "OPERATOR_KEY_FILE": c.KeyFile, "OPERATOR_CA_FILE": c.CAFile} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s: required with OPERATOR_URL (mutual TLS)", name))
		}
	}
	if c.RequesterID == "" || len(c.RequesterID) > 64 {
		errs = append(errs, errors.New("OPERATOR_REQUESTER_ID: want 1 to 64 characters"))
	}
	if c.Timeout <= 0 || c.Timeout > time.Minute {
		errs = append(errs, fmt.Errorf("OPERATOR_TIMEOUT %s: must be above 0 and at most 1m", c.Timeout))
	}
	return errors.Join(errs...)
}

// MinControlTokenLength is the shortest CONTROL_TOKEN accepted: 32 bytes,
// 256 bits when random.
const MinControlTokenLength = 32

var hostname = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// Validate checks what the types alone cannot; config.Parse runs it.
// Whether the TLS files exist is New's to find out: deployment checks
// run Validate where they do not.
func (c Config) Validate() error {
	var errs []error
	if _, err := smdpsim.ParsePools(c.ProfileTypes); err != nil {
		errs = append(errs, fmt.Errorf("PROFILE_TYPES: %w", err))
	}
	if err := checkListenAddr(c.ES2PlusAddr); err != nil {
		errs = append(errs, err)
	} else if _, port, _ := net.SplitHostPort(c.ES2PlusAddr); c.ES2PlusAddr == c.HTTP.Addr && port != "0" {
		errs = append(errs, fmt.Errorf("ES2PLUS_ADDR %q is HTTP_ADDR too: ES2+ needs a port of its own", c.ES2PlusAddr))
	}
	if n := len(c.ControlToken.Reveal()); c.ControlAPI && n < MinControlTokenLength {
		errs = append(errs, fmt.Errorf("CONTROL_TOKEN: %d bytes; CONTROL_API=true requires at least %d, such as `openssl rand -base64 32` prints", n, MinControlTokenLength))
	}
	if len(c.SMDPAddress) > 253 || !hostname.MatchString(c.SMDPAddress) {
		errs = append(errs, fmt.Errorf("SMDP_ADDRESS %q: want a DNS name, such as smdp.example.com", c.SMDPAddress))
	}
	return errors.Join(append(errs, c.Operator.validate(), c.HTTP.Validate(), c.Telemetry.Validate())...)
}

func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("ES2PLUS_ADDR %q: want [host]:port, such as :8443 (%v)", addr, err)
	}
	return nil
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
