// Package network is a client of the mobile network behind live eSIMs:
// its usage feed (first attach and data used of a list of profiles) and
// its bundles (a top-up's data and days added to a profile, once per
// top-up id). JSON over HTTPS with mutual TLS, the API smdp-sim plays;
// it implements ordering.Network.
package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/esimplatform/esim/services/ordering"

	"github.com/esimplatform/esim/libs/mtls"
)

// The paths of the API below its base URL.
const (
	PathUsage   = "/network/v1/usage"
	PathBundles = "/network/v1/bundles"
)

// DefaultTimeout bounds each call of a Config without a Timeout.
const DefaultTimeout = 10 * time.Second

// MaxResponseBytes bounds an answer: a reading is about 120 bytes, and
// ordering.UsageBatch of them fit well within.
const MaxResponseBytes = 4 << 20

// Config says where the network's API is and how to authenticate to it.
type Config struct {
	// URL is the API's base URL (https).
	URL string
	// CertFile and KeyFile are ordering's client certificate and key;
	// CAFile the CA of the network's server certificate (PEM). The system
	// roots are not trusted.
	CertFile, KeyFile, CAFile string
	// Timeout bounds each call; DefaultTimeout when zero.
	Timeout time.Duration
}

// Client calls the network's API. It is safe for concurrent use.
type Client struct {
	base      string
	timeout   time.Duration
	http      *http.Client
	transport *http.Transport
}

var _ ordering.Network = (*Client)(nil)

// New loads the certificates of cfg and makes a Client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("network: URL %q: want an https URL without query or fragment (the network API needs mutual TLS)", cfg.URL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("network: Timeout %s is negative", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tlsConfig, err := mtls.Client(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &Client{
		base:    strings.TrimRight(u.String(), "/"),
		timeout: timeout,
		// Each call's context carries the timeout, so a timeout is one
		// error whatever part of the call it cut.
		http: &http.Client{
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		transport: transport,
	}, nil
}

// Close closes the idle connections to the network.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

type usageRequest struct {
	ICCIDs []string `json:"iccids"`
}

type reading struct {
	ICCID         *string    `json:"iccid"`
	FirstAttachAt *time.Time `json:"first_attach_at"`
	UsedBytes     *int64     `json:"used_bytes"`
	ReadAt        *time.Time `json:"read_at"`
}

type usageResponse struct {
	Readings *[]reading `json:"readings"`
}

type bundleRequest struct {
	TopUpID string `json:"topup_id"`
	ICCID   string `json:"iccid"`
	Bytes   int64  `json:"bytes"`
	Days    int32  `json:"days"`
}

type errorResponse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Usage reads the profiles of iccids the network serves. A reading of an
// ICCID not asked about, or without its fields, makes the whole answer
// an error: applying a part of a garbled answer could move an eSIM on
// what the network never said.
func (c *Client) Usage(ctx context.Context, iccids []string) ([]ordering.UsageReading, error) {
	if len(iccids) == 0 {
		return nil, nil
	}
	var resp usageResponse
	status, errBody, err := c.post(ctx, PathUsage, usageRequest{ICCIDs: iccids}, &resp)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("network usage: HTTP %d%s", status, errBody)
	}
	if resp.Readings == nil {
		return nil, errors.New("network usage: the answer has no readings")
	}
	asked := make(map[string]bool, len(iccids))
	for _, i := range iccids {
		asked[i] = true
	}
	out := make([]ordering.UsageReading, 0, len(*resp.Readings))
	for i, r := range *resp.Readings {
		if r.ICCID == nil || r.UsedBytes == nil || r.ReadAt == nil || *r.UsedBytes < 0 || !asked[*r.ICCID] {
			return nil, fmt.Errorf("network usage: reading %d is not one of an ICCID asked about with used_bytes >= 0 and read_at", i)
		}
		u := ordering.UsageReading{ICCID: *r.ICCID, UsedBytes: *r.UsedBytes, ReadAt: *r.ReadAt}
		if r.FirstAttachAt != nil {
			u.AttachedAt = *r.FirstAttachAt
		}
		out = append(out, u)
	}
	return out, nil
}

// AddBundle adds b once per b.TopUpID. The network's refusal (an unknown
// ICCID, the top-up id used for another bundle, a bundle it does not
// take) wraps ordering.ErrProviderFailed; no answer, or the network's own
// failure, leaves the outcome unknown, and the same call may be made
// again.
func (c *Client) AddBundle(ctx context.Context, b ordering.Bundle) error {
	status, errBody, err := c.post(ctx, PathBundles, bundleRequest{TopUpID: b.TopUpID.String(), ICCID: b.ICCID, Bytes: b.Bytes, Days: b.Days}, nil)
	switch {
	case err != nil:
		return err
	case status == http.StatusCreated || status == http.StatusOK:
		return nil
	case status == http.StatusBadRequest || status == http.StatusNotFound || status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: the network refused the bundle (HTTP %d%s)", ordering.ErrProviderFailed, status, errBody)
	default:
		return fmt.Errorf("network bundle: HTTP %d%s", status, errBody)
	}
}

// post sends in and returns the status; a 2xx answer is decoded into out
// (when not nil), another one's error is returned as ": code: message"
// for the caller's error.
func (c *Client) post(ctx context.Context, path string, in, out any) (int, string, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("network %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("network %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, "", fmt.Errorf("network %s: %w", path, err)
	}
	if len(data) > MaxResponseBytes {
		return 0, "", fmt.Errorf("network %s: the answer is larger than %d bytes", path, MaxResponseBytes)
	}
	if resp.StatusCode/100 != 2 {
		var e errorResponse
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			return resp.StatusCode, ": " + clip(e.Error.Code, 40) + ": " + clip(e.Error.Message, 200), nil
		}
		return resp.StatusCode, "", nil
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, "", fmt.Errorf("network %s: the answer is not JSON of this call", path)
		}
	}
	return resp.StatusCode, "", nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
