package es2plus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"

	"github.com/esimplatform/esim/libs/mtls"
)

// FunctionHandleDownloadProgressInfo is the function an SM-DP+ calls at
// the operator (SGP.22 5.3.5) to report the steps of a profile's download.
const FunctionHandleDownloadProgressInfo = "handleDownloadProgressInfo"

// NotifierConfig says where the operator's ES2+ endpoint is and how the
// simulator authenticates to it: mutual TLS, as the operator's side of
// ES2+ asks.
type NotifierConfig struct {
	// URL is the operator's ES2+ base URL (https), without PathPrefix.
	URL string
	// CertFile and KeyFile are the simulator's client certificate and
	// key; CAFile the CA of the operator's server certificate (PEM).
	CertFile, KeyFile, CAFile string
	// RequesterID is the functionRequesterIdentifier: the SM-DP+'s
	// identity at the operator.
	RequesterID string
	// Timeout bounds each notification.
	Timeout time.Duration
}

// Notifier sends handleDownloadProgressInfo to the operator.
type Notifier struct {
	url         string
	requesterID string
	timeout     time.Duration
	http        *http.Client
}

// NewNotifier loads the certificates of cfg.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("operator URL %q: want an https URL (ES2+ needs mutual TLS)", cfg.URL)
	}
	if cfg.RequesterID == "" || cfg.Timeout <= 0 {
		return nil, errors.New("notifier: RequesterID and a positive Timeout are required")
	}
	tlsConfig, err := mtls.Client(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &Notifier{
		url:         strings.TrimRight(u.String(), "/") + PathPrefix + FunctionHandleDownloadProgressInfo,
		requesterID: cfg.RequesterID,
		timeout:     cfg.Timeout,
		http: &http.Client{
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

type notificationPointStatus struct {
	Status string `json:"status"`
}

// notificationRequest is handleDownloadProgressInfo's body, field by field
// as SGP.22 names them.
type notificationRequest struct {
	Header                  requestHeader           `json:"header"`
	EID                     string                  `json:"eid,omitempty"`
	ICCID                   string                  `json:"iccid"`
	ProfileType             string                  `json:"profileType"`
	Timestamp               string                  `json:"timestamp"`
	NotificationPointID     int                     `json:"notificationPointId"`
	NotificationPointStatus notificationPointStatus `json:"notificationPointStatus"`
}

// Notify sends n and returns nil when the operator executed it: 204 No
// Content, as SGP.22 answers a function without output data, or a 200
// whose header says Executed.
func (c *Notifier) Notify(ctx context.Context, n smdpsim.Notification) error {
	body, err := json.Marshal(notificationRequest{
		Header:                  requestHeader{FunctionRequesterIdentifier: c.requesterID, FunctionCallIdentifier: rand.Text()},
		EID:                     n.EID,
		ICCID:                   n.ICCID,
		ProfileType:             n.ProfileType,
		Timestamp:               n.Timestamp.UTC().Format(time.RFC3339),
		NotificationPointID:     n.Point,
		NotificationPointStatus: notificationPointStatus{Status: n.Status},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Admin-Protocol", ProtocolVersion)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", FunctionHandleDownloadProgressInfo, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	if err != nil {
		return fmt.Errorf("%s: %w", FunctionHandleDownloadProgressInfo, err)
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	var answer struct {
		Header responseHeader `json:"header"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.Header.FunctionExecutionStatus.Status == "" {
		return fmt.Errorf("%s: HTTP %d without an ES2+ answer", FunctionHandleDownloadProgressInfo, resp.StatusCode)
	}
	st := answer.Header.FunctionExecutionStatus
	switch {
	case resp.StatusCode == http.StatusOK && strings.HasPrefix(st.Status, "Executed-"):
		return nil
	case st.StatusCodeData != nil:
		d := st.StatusCodeData
		return fmt.Errorf("%s: %s %s/%s %s: %s", FunctionHandleDownloadProgressInfo, st.Status, d.SubjectCode, d.ReasonCode, d.SubjectIdentifier, d.Message)
	default:
		return fmt.Errorf("%s: HTTP %d, %s", FunctionHandleDownloadProgressInfo, resp.StatusCode, st.Status)
	}
}
